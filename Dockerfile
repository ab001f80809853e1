# The mcpulse binary for docker-compose.yml: every service runs one of its subcommands.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /mcpulse ./cmd/mcpulse

FROM gcr.io/distroless/static-debian12
COPY --from=build /mcpulse /mcpulse
ENTRYPOINT ["/mcpulse"]
