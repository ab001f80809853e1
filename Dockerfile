# The mcpulse binary for docker-compose.yml: every service runs one of its subcommands.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /mcpulse ./cmd/mcpulse

# The dashboards' chart libraries, installed from the pinned package-lock.json (no CDN at run
# time); "mcpulse dashboards" finds it in dashboards/web beside the binary.
FROM node:20-bookworm-slim AS web
WORKDIR /web
COPY dashboards/web/package.json dashboards/web/package-lock.json ./
RUN npm ci --no-audit --no-fund

# No shell and no curl: the compose health checks run "mcpulse healthcheck URL". The services
# serve on 8080 (gateway, dashboards) and 9100 (--metrics-listen of consume and scheduler).
FROM gcr.io/distroless/static-debian12:nonroot
USER nonroot
EXPOSE 8080 9100
COPY --from=build /mcpulse /mcpulse
# The files dashboards/server.Libraries lists (the pages load nothing else).
COPY --from=web /web/node_modules/chart.js/dist/chart.umd.min.js /dashboards/web/node_modules/chart.js/dist/chart.umd.min.js
COPY --from=web /web/node_modules/luxon/build/global/luxon.min.js /dashboards/web/node_modules/luxon/build/global/luxon.min.js
COPY --from=web /web/node_modules/chartjs-adapter-luxon/dist/chartjs-adapter-luxon.umd.min.js /dashboards/web/node_modules/chartjs-adapter-luxon/dist/chartjs-adapter-luxon.umd.min.js
COPY --from=web /web/node_modules/chartjs-plugin-annotation/dist/chartjs-plugin-annotation.min.js /dashboards/web/node_modules/chartjs-plugin-annotation/dist/chartjs-plugin-annotation.min.js
COPY --from=web /web/node_modules/chartjs-chart-funnel/build/index.umd.min.js /dashboards/web/node_modules/chartjs-chart-funnel/build/index.umd.min.js
ENTRYPOINT ["/mcpulse"]
