# payreq — every set-up step lives here, so `make run` and `make test` work on a fresh clone.

GO          ?= go
DATA        ?= .data
BIN         := bin/payreq
NODE_DIR    := .tools/node
SPECTRAL    := $(NODE_DIR)/node_modules/.bin/spectral
REDOCLY     := $(NODE_DIR)/node_modules/.bin/redocly
NPM_TOOLS   := @stoplight/spectral-cli@6.16.3 @redocly/cli@2.77.0 \
               openapi-typescript@7.13.0 openapi-fetch@0.17.0 typescript@5.9.3 @types/node@20.19.43
# The stamp names the package list, so a changed list installs again.
NODE_STAMP  := $(NODE_DIR)/.installed-$(shell printf '%s' '$(NPM_TOOLS)' | cksum | cut -d' ' -f1)
OPENAPI_TS  := $(NODE_DIR)/node_modules/.bin/openapi-typescript
TSC         := $(NODE_DIR)/node_modules/.bin/tsc
OAPI_CODEGEN := $(GO) run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen

.PHONY: all build run test bench generate check-generated ts-generate check-ts-generated ts-check lint vet postgres db-stop clean

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

# Every check CI runs: generated code up to date, spec lint, vet, all tests.
test: check-generated check-ts-generated lint vet ts-check postgres
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
	@before=$$(mktemp -d) && cp -R gen "$$before/" && $(MAKE) -s generate && \
	if ! diff -r "$$before/gen" gen >/dev/null; then \
		echo "gen/ was out of date with openapi.yaml: it is regenerated now, commit it"; diff -r "$$before/gen" gen | head -20; \
		rm -rf "$$before"; exit 1; \
	fi; rm -rf "$$before"

$(NODE_STAMP):
	@command -v npm >/dev/null || { echo "npm is required for the spec linters and TypeScript checks: apt-get install nodejs npm"; exit 1; }
	npm install --prefix $(NODE_DIR) --no-audit --no-fund --loglevel=error $(NPM_TOOLS)
	@rm -f $(NODE_DIR)/.installed*; touch $@

# TypeScript types of openapi.yaml, and the typed openapi-fetch example.
ts-generate: $(NODE_STAMP)
	$(OPENAPI_TS) openapi.yaml --redocly client/ts/redocly.yaml -o client/ts/schema.d.ts

check-ts-generated: $(NODE_STAMP)
	@before=$$(mktemp -d) && cp client/ts/schema.d.ts "$$before/" && $(MAKE) -s ts-generate >/dev/null && \
	if ! diff -q "$$before/schema.d.ts" client/ts/schema.d.ts >/dev/null; then \
		echo "client/ts/schema.d.ts was out of date with openapi.yaml: it is regenerated now, commit it"; \
		diff -u "$$before/schema.d.ts" client/ts/schema.d.ts | head -20; rm -rf "$$before"; exit 1; \
	fi; rm -rf "$$before"

ts-check: $(NODE_STAMP)
	$(TSC) --noEmit -p client/ts

lint: $(NODE_STAMP)
	$(SPECTRAL) lint --fail-severity=warn openapi.yaml
	$(REDOCLY) lint openapi.yaml

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l cmd internal db client examples); if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi

db-stop: build
	./$(BIN) db-stop

clean:
	rm -rf bin .tools
