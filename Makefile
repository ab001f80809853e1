# Developer and CI entry points. "make test" needs redis-server, clickhouse-server and
# zookeeper (the ClickHouse cluster tests), which "make deps" installs from Debian when missing
# (DESIGN.md §7).

GO       ?= go
PACKAGES := redis-server clickhouse-server clickhouse-client zookeeper nodejs npm chromium
# sudo only when not already root.
SUDO     := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: deps web chdb sdk test demo build screenshots

# Installs whichever of $(PACKAGES) is missing; a package counts as present when its command
# is found (on PATH or in /usr/sbin), or the newer single "clickhouse" binary stands in;
# zookeeper counts when java runs and its jar is in /usr/share/java (stack/zookeeper.go).
deps:
	@have() { command -v "$$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$$1" ]; }; \
	missing=""; \
	have redis-server || missing="$$missing redis-server"; \
	have clickhouse-server || have clickhouse || missing="$$missing clickhouse-server"; \
	have clickhouse-client || have clickhouse || missing="$$missing clickhouse-client"; \
	{ have java && [ -f /usr/share/java/zookeeper.jar ]; } || missing="$$missing zookeeper"; \
	have node || missing="$$missing nodejs"; \
	have npm || missing="$$missing npm"; \
	have chromium || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
		echo "make deps: installing$$missing"; \
		$(SUDO) apt-get update && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	else \
		echo "make deps: $(PACKAGES) already installed"; \
	fi

# The dashboards' chart library (Chart.js, pinned in dashboards/web/package-lock.json), served
# from disk by "mcpulse dashboards" and "mcpulse demo --serve".
web: deps
	npm ci --prefix dashboards/web --no-audit --no-fund

# The current ClickHouse engine for the tests (testkit/chdb): chDB's libchdb.so, ClickHouse
# 26.7, the npm package @chdb/lib-linux-x64-gnu pinned in testdata/chdb/package-lock.json
# (the library the npm package chdb 3.4 loads; 550 MB in testdata/chdb/node_modules, about 30 s
# to install). Installed again only when the lock file changes.
CHDB_LIB := testdata/chdb/node_modules/@chdb/lib-linux-x64-gnu/libchdb.so

chdb: $(CHDB_LIB)

$(CHDB_LIB): testdata/chdb/package-lock.json | deps
	npm ci --prefix testdata/chdb --no-audit --no-fund
	@test -f $@ || { echo "make chdb: npm installed no $@ (it is built for linux-x64 with glibc only)"; exit 1; }
	touch $@

# The real PostHog SDK clients the gateway's end-to-end tests drive (ingest/gateway/testdata):
# posthog-node (node/); @posthog/mcp around MCP servers (two on stdio, one on Streamable HTTP,
# stateful and stateless) and a custom dispatcher on its PostHogMCP API, driven by clients built
# with the official MCP TypeScript SDK (mcp/); and @traceloop/instrumentation-mcp and
# @shinzolabs/instrumentation-mcp around an MCP client and server exporting OTLP (otel/); each
# pinned by its package-lock.json. Installed again only
# when a lock file changes (the tests also run npm ci themselves when node_modules is missing).
SDK_DIRS := ingest/gateway/testdata/node ingest/gateway/testdata/mcp ingest/gateway/testdata/otel

sdk: $(addsuffix /node_modules/.package-lock.json,$(SDK_DIRS))

%/node_modules/.package-lock.json: %/package-lock.json | deps
	npm ci --prefix $* --no-audit --no-fund
	touch $@

test: deps web chdb sdk
	$(GO) test ./... -count=1 -timeout 20m

demo: deps web
	$(GO) run ./cmd/mcpulse demo

# The release version comes from git (a tag, else the commit), shown by "mcpulse version".
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)

build:
	$(GO) build -ldflags "-X github.com/mcpulse/mcpulse/internal/buildinfo.Version=$(VERSION)" -o bin/mcpulse ./cmd/mcpulse

# Screenshots of every dashboard over the demo's data (and over a range without data), taken
# by the headless-Chromium test, into dashboards/screenshots/ (git ignores them: about 4 MB).
screenshots: deps web
	MCPULSE_SCREENSHOTS=dashboards/screenshots $(GO) test -count=1 -run TestEveryDashboardDrawsItsQueryFigures ./dashboards/server
