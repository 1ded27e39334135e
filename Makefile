# payreq — every set-up step lives here, so `make run` and `make test` work on a fresh clone.

GO          ?= go
DATA        ?= .data
BIN         := bin/payreq
NODE_DIR    := .tools/node
SPECTRAL    := $(NODE_DIR)/node_modules/.bin/spectral
REDOCLY     := $(NODE_DIR)/node_modules/.bin/redocly
NPM_TOOLS   := @stoplight/spectral-cli@6.16.3 @redocly/cli@2.77.0 \
               openapi-typescript@7.13.0 openapi-fetch@0.17.0 typescript@5.9.3 @types/node@20.19.43 \
               @stoplight/prism-cli@5.14.2
# The stamp names the package list, so a changed list installs again.
NODE_STAMP  := $(NODE_DIR)/.installed-$(shell printf '%s' '$(NPM_TOOLS)' | cksum | cut -d' ' -f1)
OPENAPI_TS  := $(NODE_DIR)/node_modules/.bin/openapi-typescript
TSC         := $(NODE_DIR)/node_modules/.bin/tsc
OASDIFF_VERSION := v1.33.0
OASDIFF     := .tools/go/oasdiff-$(OASDIFF_VERSION)/oasdiff
REDOC_VERSION := 2.5.4
DOCS_ASSETS   := internal/docs/assets
OAPI_CODEGEN := $(GO) run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen

.PHONY: all build run test bench generate check-generated ts-generate check-ts-generated ts-check lint breaking vet postgres chromium docs-assets check-docs-assets db-stop clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/payreq

# Starts (or reuses) the private PostgreSQL cluster under $(DATA)/postgres when
# DATABASE_URL is unset, seeds a demo on first run, prints its keys and serves.
run: build postgres
	@mkdir -p $(DATA)
	@if [ ! -s $(DATA)/demo.json ]; then \
		./$(BIN) demo --json > $(DATA)/demo.json.tmp && mv $(DATA)/demo.json.tmp $(DATA)/demo.json; \
	fi
	@echo "Demo keys ($(DATA)/demo.json):"; cat $(DATA)/demo.json
	./$(BIN) serve

# Every check CI runs: generated code up to date, spec lint, no breaking change,
# vet, all tests (internal/contract runs the flows through prism from .tools).
test: check-generated check-ts-generated check-docs-assets lint breaking vet ts-check postgres chromium $(NODE_STAMP)
	$(GO) test -count=1 -timeout 10m ./...

# Requests/s and p50/p99 latency of create (3 lines, send=false, Idempotency-Key)
# and get-by-id, through the real server on the private cluster.
bench: postgres
	$(GO) test -run '^$$' -bench . -benchtime 5s ./internal/api/

# The PostgreSQL server binaries, from Debian's packages when missing.
postgres:
	@if ! ls "$$(pg_config --bindir 2>/dev/null)/initdb" /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
		else echo "PostgreSQL server binaries not found: install them with apt-get install postgresql"; exit 1; fi; \
	fi

generate:
	$(OAPI_CODEGEN) -config gen/server.cfg.yaml openapi.yaml
	$(OAPI_CODEGEN) -config gen/client/client.cfg.yaml openapi.yaml

# Regenerates gen/ and fails when that changed anything: gen/ must always be
# what openapi.yaml generates.
check-generated:
	@before=$$(mktemp -d); trap 'rm -rf "$$before"' EXIT; \
	cp -R gen "$$before/" && $(MAKE) -s generate || exit 1; \
	if ! diff -r "$$before/gen" gen >/dev/null; then \
		echo "gen/ was out of date with openapi.yaml: it is regenerated now, commit it"; \
		diff -r "$$before/gen" gen | head -20; exit 1; \
	fi

# Redoc's standalone bundle for /docs, from the pinned npm package, byte for
# byte: committed, so building needs no npm. npm pack fetches the package alone;
# the bundle already holds its dependencies.
docs-assets:
	@command -v npm >/dev/null || { echo "npm is required for docs-assets: apt-get install nodejs npm"; exit 1; }
	@tmp=$$(mktemp -d) && \
	npm pack --silent --pack-destination "$$tmp" redoc@$(REDOC_VERSION) >/dev/null && \
	tar -xzf "$$tmp/redoc-$(REDOC_VERSION).tgz" -C "$$tmp" && \
	cp "$$tmp/package/bundles/redoc.standalone.js" "$$tmp/package/bundles/redoc.standalone.js.LICENSE.txt" $(DOCS_ASSETS)/ && \
	cp "$$tmp/package/LICENSE" $(DOCS_ASSETS)/redoc.LICENSE; \
	status=$$?; rm -rf "$$tmp"; exit $$status

# Remakes the bundle and fails when that changed it, like check-generated.
check-docs-assets:
	@before=$$(mktemp -d); trap 'rm -rf "$$before"' EXIT; \
	cp -R $(DOCS_ASSETS) "$$before/" && $(MAKE) -s docs-assets || exit 1; \
	if ! diff -r "$$before/assets" $(DOCS_ASSETS) >/dev/null; then \
		echo "$(DOCS_ASSETS) was not redoc@$(REDOC_VERSION): it is remade now, commit it"; exit 1; \
	fi

# Debian's Chromium, for the browser tests, when missing.
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else echo "Chromium not found: install it with apt-get install chromium"; exit 1; fi; \
	fi

$(NODE_STAMP):
	@command -v npm >/dev/null || { echo "npm is required for the spec linters and TypeScript checks: apt-get install nodejs npm"; exit 1; }
	npm install --prefix $(NODE_DIR) --no-audit --no-fund --loglevel=error $(NPM_TOOLS)
	@rm -f $(NODE_DIR)/.installed*; touch $@

# TypeScript types of openapi.yaml, and the typed openapi-fetch example.
ts-generate: $(NODE_STAMP)
	$(OPENAPI_TS) openapi.yaml --redocly client/ts/redocly.yaml -o client/ts/schema.d.ts

check-ts-generated: $(NODE_STAMP)
	@before=$$(mktemp -d); trap 'rm -rf "$$before"' EXIT; \
	cp client/ts/schema.d.ts "$$before/" && $(MAKE) -s ts-generate >/dev/null || exit 1; \
	if ! diff -q "$$before/schema.d.ts" client/ts/schema.d.ts >/dev/null; then \
		echo "client/ts/schema.d.ts was out of date with openapi.yaml: it is regenerated now, commit it"; \
		diff -u "$$before/schema.d.ts" client/ts/schema.d.ts | head -20; exit 1; \
	fi

ts-check: $(NODE_STAMP)
	$(TSC) --noEmit -p client/ts

lint: $(NODE_STAMP)
	$(SPECTRAL) lint --fail-severity=warn openapi.yaml
	$(REDOCLY) lint openapi.yaml

# oasdiff at a pinned version, built into .tools: a tool, not a dependency in go.mod.
$(OASDIFF):
	GOBIN=$(abspath $(dir $@)) $(GO) install github.com/oasdiff/oasdiff@$(OASDIFF_VERSION)

# Fails when openapi.yaml breaks the released contract. A break on purpose is a
# new release: copy openapi.yaml over api/released/v1.yaml in the same commit.
breaking: $(OASDIFF)
	$(OASDIFF) breaking --fail-on ERR api/released/v1.yaml openapi.yaml

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l cmd internal db client examples); if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi

db-stop: build
	./$(BIN) db-stop

clean:
	rm -rf bin .tools
