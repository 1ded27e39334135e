# payreq — every set-up step lives here, so `make run` and `make test` work on a fresh clone.

GO          ?= go
DATA        ?= .data
BIN         := bin/payreq
NODE_DIR    := .tools/node
SPECTRAL    := $(NODE_DIR)/node_modules/.bin/spectral
REDOCLY     := $(NODE_DIR)/node_modules/.bin/redocly
NPM_TOOLS   := @stoplight/spectral-cli@6.16.3 @redocly/cli@2.77.0 \
               openapi-typescript@7.13.0 openapi-fetch@0.17.0 typescript@5.9.3 @types/node@20.19.43 \
               @stoplight/prism-cli@5.14.2 axe-core@4.10.3
# The stamp names the package list, so a changed list installs again.
NODE_STAMP  := $(NODE_DIR)/.installed-$(shell printf '%s' '$(NPM_TOOLS)' | cksum | cut -d' ' -f1)
OPENAPI_TS  := $(NODE_DIR)/node_modules/.bin/openapi-typescript
TSC         := $(NODE_DIR)/node_modules/.bin/tsc
OASDIFF_VERSION := v1.33.0
OASDIFF     := .tools/go/oasdiff-$(OASDIFF_VERSION)/oasdiff
REDOC_VERSION := 2.5.4
DOCS_ASSETS   := internal/docs/assets
OAPI_CODEGEN := $(GO) run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen
# Go tools at pinned versions, built into .tools like oasdiff. staticcheck
# v0.8.2 is release 2026.2.2. govulncheck v1.9.0 does not build from the
# module proxy (a golang.org/x/telemetry version it needs is not served),
# so v1.8.0.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := .tools/go/staticcheck-$(STATICCHECK_VERSION)/staticcheck
GOVULNCHECK_VERSION := v1.8.0
GOVULNCHECK := .tools/go/govulncheck-$(GOVULNCHECK_VERSION)/govulncheck
# The Go vulnerability database for `make vulncheck`: GOVULNDB when set (a
# URL, or file:///dir for a directory of OSV files); else https://vuln.go.dev
# when it answers within 5 s; else the committed snapshot VULNDB_SNAPSHOT
# (see vulndb-snapshot), extracted once into .tools/vulndb-<commit>.
GOVULNDB    ?=
VULNDB_SNAPSHOT := .ci/vulndb/osv.tar.gz
VULNDB_SOURCE   := .ci/vulndb/SOURCE
# How long each fuzz target runs in `make fuzz`.
# A count, not a duration: a duration can end a run mid-input and fail it
# with "context deadline exceeded" on a loaded machine.
FUZZTIME    ?= 500x

.PHONY: screenshots lighthouse all build run jq test checks go-test check-file-sizes faults soak bench bench-profile generate check-generated ts-generate check-ts-generated ts-check lint breaking vet staticcheck vulncheck vulndb-snapshot fuzz postgres pgbouncer patroni ha ha-stop chromium docs-assets check-docs-assets db-stop clean

# $(call apt,FILES,PACKAGES): installs the Debian PACKAGES (as root, with
# apt-get) unless every one of FILES exists.
apt = @if ! ls $(1) >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) >/dev/null; \
		else echo "$(2) not found: install with apt-get install $(2)"; exit 1; fi; \
	fi

all: build

build:
	$(GO) build -o $(BIN) ./cmd/payreq

# No tracked file over 5 MB but those listed in LARGE_FILES_ALLOWED: a build
# output (a 27.7 MB binary once) or a data dump must never land in the history.
LARGE_FILES_ALLOWED :=
check-file-sizes:
	@big=$$(git ls-files -z | xargs -0 -r stat -c '%s %n' 2>/dev/null | \
		awk -v allowed=' $(LARGE_FILES_ALLOWED) ' '$$1 > 5*1024*1024 && index(allowed, " " $$2 " ") == 0 { print $$2 " (" $$1 " bytes)" }'); \
	if [ -n "$$big" ]; then echo "tracked files over 5 MB (add to LARGE_FILES_ALLOWED only if it must be in git):"; echo "$$big"; exit 1; fi

# make run HA=1 serves on the highly available cluster (make ha), with the
# secret files payreq then needs and a demo of its own.
DEMO_JSON = $(if $(HA),$(HA_DIR)/demo.json,$(DATA)/demo.json)
RUN_ENV   = $(if $(HA),DATABASE_URL=$$(cat $(HA_DIR)/database-url) PAYREQ_SIGNING_KEY_FILE=$(HA_DIR)/payreq/signing-key.pem \
              PAYREQ_PEPPER_FILE=$(HA_DIR)/payreq/pepper PAYREQ_ENCRYPTION_KEY_FILE=$(HA_DIR)/payreq/encryption-key)
# What make run prints of demo.json, as jq lines.
DEMO_LINES = "The demo, kept in $(DEMO_JSON) (remove it to seed a new one):", \
	"  merchant API key     \(.merchant.keyId)", \
	"  merchant key secret  \(.merchant.secret)", \
	"  reseller API key     \(.reseller.keyId)", \
	"  reseller key secret  \(.reseller.secret)", \
	"  portal               \($$portal)", \
	"  merchant Owner       \(.merchant.ownerEmail)  password \(.merchant.ownerPassword)", \
	"  reseller Owner       \(.reseller.ownerEmail)  password \(.reseller.ownerPassword)", \
	"  sign-up page         \(.reseller.signUpUrl // "none")"

# Starts (or reuses) the private PostgreSQL cluster under $(DATA)/postgres when
# DATABASE_URL is unset, seeds a demo on first run (kept in $(DATA)/demo.json),
# prints its API keys, portal sign-ins and the reseller's sign-up page, and serves
# (with PAYREQ_WEBHOOK_ALLOW_PRIVATE=true unless set: local webhook receivers).
run: build postgres jq $(if $(HA),ha)
	@mkdir -p $(DATA)
	@# demo.json holds the demo keys' secrets: owner-only, like every secret file.
	@if [ ! -s $(DEMO_JSON) ]; then \
		(umask 077 && $(RUN_ENV) ./$(BIN) demo --json > $(DEMO_JSON).tmp) && mv $(DEMO_JSON).tmp $(DEMO_JSON); \
	fi; chmod 600 $(DEMO_JSON)
	@jq -r --arg portal "$${PAYREQ_PUBLIC_URL:-http://$${PAYREQ_ADDR:-127.0.0.1:8080}}/portal/" '$(DEMO_LINES)' $(DEMO_JSON)
	$(RUN_ENV) PAYREQ_WEBHOOK_ALLOW_PRIVATE=$${PAYREQ_WEBHOOK_ALLOW_PRIVATE:-true} ./$(BIN) serve

# The highly available cluster of deploy/ha on this machine (docs/operations.md,
# "Highly available PostgreSQL"): three etcd members, three Patroni members
# of PostgreSQL 15 and HAProxy on 127.0.0.10-13, under $(HA_DIR); prints its
# DATABASE_URL (through HAProxy to the leader). make ha-stop stops it; its
# folders stay for the next make ha (rm -rf $(HA_DIR) to start afresh).
HA_DIR ?= $(DATA)/ha
ha: build postgres patroni
	@PAYREQ=./$(BIN) deploy/ha/local.sh start $(HA_DIR)
	@test -s $(HA_DIR)/payreq/pepper || ./$(BIN) secrets init --dir $(HA_DIR)/payreq >/dev/null

ha-stop:
	@deploy/ha/local.sh stop $(HA_DIR)

jq:
	$(call apt,/usr/bin/jq,jq)

# Every check CI runs: generated code up to date, spec lint, no breaking change,
# vet, staticcheck and govulncheck, each fuzz target briefly, then all tests
# under the race detector (internal/contract runs the flows through prism
# from .tools).
# golang.org/x/crypto/argon2 alone is compiled without the race detector's
# instrumentation (RACE_GOFLAGS, through GOFLAGS so that the payreq the
# fault tests build gets it too): every password hashed or checked in a test
# (each demo seed, member and sign-in) cost ~0.35 s of CPU instrumented,
# ~0.12 s not, and was half the CPU of the portal's tests. The parameters
# are production's; only races inside argon2's own code go unwatched.
RACE_GOFLAGS := -gcflags=golang.org/x/crypto/argon2=-race=false
test: postgres pgbouncer patroni chromium $(NODE_STAMP)
	@$(MAKE) --no-print-directory -j2 --output-sync=target go-test checks

# The checks, one at a time beside the tests (make test runs both at once:
# the tests wait on PostgreSQL, processes and browsers more than they compute,
# and the checks fill those waits). None writes to the tree.
checks: check-file-sizes check-generated check-ts-generated check-docs-assets lint breaking vet staticcheck vulncheck ts-check fuzz

go-test: postgres pgbouncer patroni chromium $(NODE_STAMP)
	GOFLAGS="$(strip $(GOFLAGS) $(RACE_GOFLAGS))" $(GO) test -race -count=1 -timeout 10m ./...

# The fault tests alone (`make test` runs them too, in go test ./...): payreq
# as real processes on private PostgreSQL clusters of their own under /tmp,
# the database stopped and started under load, SIGTERM and SIGKILL under
# load, mail and SMS providers down, slow and failing, the card processor
# timing out; about a minute.
faults: postgres pgbouncer patroni
	$(GO) test -count=1 -timeout 10m ./internal/faults/
	$(GO) test -count=1 -timeout 5m -run 'Provider|Down|Crash|TwoWorkers' ./internal/delivery/

# SOAK (default 5m) at 70 % of the peak rate of a mixed load (create, get,
# list), measured first in the same run: fails on any error or on memory or
# goroutines that grow; prints requests, errors, RSS, heap and goroutines.
SOAK ?= 5m
soak: postgres
	PAYREQ_SOAK=$(SOAK) $(GO) test -count=1 -timeout 30m -run '^TestSoak$$' -v ./internal/faults/

# The performance harness (bench/): starts a private bench cluster under
# $(DATA)/bench (never the dev/test one), loads a database of 100,000 and one
# of 1,000,000 invoices once (kept for later runs; -sizes), and measures each
# scenario, the portal's pages included, through `payreq serve` over loopback
# beside (a) pgbench running the same SQL, (b) the server without request
# validation and (c) a bare Echo handler; prints the third round's targets at
# both sizes and the tables, and writes bench/results.md and bench/explain.txt.
# About 20 minutes (3 more the first time: the loads); the third round's runs
# alone (BENCH_FLAGS in docs/testing.md, "Performance") about 12.
# The load program is bench/ itself, built from this module; pgbench comes with
# the PostgreSQL server binaries. BENCH_FLAGS: see ./bin/payreq-bench -h.
BENCH_FLAGS ?=
bench: build postgres lighthouse
	$(GO) build -o bin/payreq-bench ./bench
	$(GO) build -o bin/bench-echo ./bench/echo
	./bin/payreq-bench -data $(DATA)/bench $(BENCH_FLAGS)

# Lighthouse 12.2.3 on the portal's pages, mobile (bench/lighthouse): starts
# payreq serve on a private cluster under $(DATA)/lighthouse, seeds a demo
# and a busy day, signs its merchant's Owner in through the portal and
# writes bench/lighthouse.md (score, FCP, LCP, TBT, CLS, bytes per page;
# target 100). A timing, so here and in make bench, never in make test.
# Lighthouse 13 needs Node 22: 12.2.3 runs on Node 20. Its own folder, not
# $(NODE_DIR), so make test's tools stay as they are. LIGHTHOUSE_FLAGS: see
# ./bin/payreq-lighthouse -h. About 6 minutes on a loaded 2-core machine.
LIGHTHOUSE_VERSION := 12.2.3
LIGHTHOUSE_DIR     := .tools/lighthouse
LIGHTHOUSE_STAMP   := $(LIGHTHOUSE_DIR)/.installed-lighthouse-$(LIGHTHOUSE_VERSION)
LIGHTHOUSE_FLAGS   ?=
$(LIGHTHOUSE_STAMP):
	@command -v npm >/dev/null || { echo "npm is required for make lighthouse: apt-get install nodejs npm"; exit 1; }
	npm install --prefix $(LIGHTHOUSE_DIR) --no-audit --no-fund --loglevel=error lighthouse@$(LIGHTHOUSE_VERSION)
	@rm -f $(LIGHTHOUSE_DIR)/.installed*; touch $@

lighthouse: build postgres chromium $(LIGHTHOUSE_STAMP)
	$(GO) build -o bin/payreq-lighthouse ./bench/lighthouse
	./bin/payreq-lighthouse -payreq $(BIN) -data $(DATA)/lighthouse \
		-lighthouse $(LIGHTHOUSE_DIR)/node_modules/.bin/lighthouse -out bench/lighthouse.md $(LIGHTHOUSE_FLAGS)

# CPU and allocation profiles (pprof) of each scenario under load, from
# payreq's PAYREQ_DEBUG_ADDR listener, into bench/profiles/; prints the top of
# each. Open one with: go tool pprof -http=: bin/payreq bench/profiles/get.cpu.pprof
bench-profile: build postgres
	$(GO) build -o bin/payreq-bench ./bench
	./bin/payreq-bench -data $(DATA)/bench -profile bench/profiles $(BENCH_FLAGS)

# The PostgreSQL server binaries, from Debian's packages when missing.
postgres:
	$(call apt,/usr/lib/postgresql/*/bin/initdb,postgresql)

# gen/ from openapi.yaml, and the copy of openapi.yaml that /openapi.yaml
# serves (go:embed cannot reach the repository root from internal/docs).
generate:
	$(OAPI_CODEGEN) -config gen/models/models.cfg.yaml openapi.yaml
	$(OAPI_CODEGEN) -config gen/server.cfg.yaml openapi.yaml
	$(OAPI_CODEGEN) -config gen/client/client.cfg.yaml openapi.yaml
	cp openapi.yaml internal/docs/openapi.yaml

# Generates gen/ from openapi.yaml into a temporary folder and fails when it
# differs from what is committed, as does a served copy other than
# openapi.yaml: they must always be what openapi.yaml generates. Nothing in
# the tree is written, so the tests may build it meanwhile (make test).
check-generated:
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	for cfg in gen/models/models.cfg.yaml gen/server.cfg.yaml gen/client/client.cfg.yaml; do \
		out=$$(sed -n 's/^output: //p' $$cfg); mkdir -p "$$tmp/$$(dirname $$out)"; \
		sed "s|^output: |output: $$tmp/|" $$cfg > "$$tmp/$$(basename $$cfg)"; \
		$(OAPI_CODEGEN) -config "$$tmp/$$(basename $$cfg)" openapi.yaml || exit 1; \
		if ! cmp -s "$$tmp/$$out" $$out; then \
			echo "$$out is out of date with openapi.yaml: run make generate and commit it"; diff -u $$out "$$tmp/$$out" | head -20; exit 1; \
		fi; \
	done; \
	cmp -s openapi.yaml internal/docs/openapi.yaml || { echo "internal/docs/openapi.yaml is not openapi.yaml: run make generate and commit it"; exit 1; }

# Redoc's standalone bundle for /docs, from the pinned npm package, byte for
# byte: committed, so building needs no npm. npm pack fetches the package alone;
# the bundle already holds its dependencies. Writes the checksums that
# check-docs-assets compares against, so make test needs no network for them.
docs-assets:
	@command -v npm >/dev/null || { echo "npm is required for docs-assets: apt-get install nodejs npm"; exit 1; }
	@tmp=$$(mktemp -d) && \
	npm pack --silent --pack-destination "$$tmp" redoc@$(REDOC_VERSION) >/dev/null && \
	tar -xzf "$$tmp/redoc-$(REDOC_VERSION).tgz" -C "$$tmp" && \
	cp "$$tmp/package/bundles/redoc.standalone.js" "$$tmp/package/bundles/redoc.standalone.js.LICENSE.txt" $(DOCS_ASSETS)/ && \
	cp "$$tmp/package/LICENSE" $(DOCS_ASSETS)/redoc.LICENSE && \
	(cd $(DOCS_ASSETS) && echo "# redoc@$(REDOC_VERSION), written by make docs-assets" > SHA256SUMS && \
	 sha256sum redoc.standalone.js redoc.standalone.js.LICENSE.txt redoc.LICENSE >> SHA256SUMS); \
	status=$$?; rm -rf "$$tmp"; exit $$status

# The committed bundle is the one make docs-assets wrote: its checksums match.
check-docs-assets:
	@(cd $(DOCS_ASSETS) && grep -q "redoc@$(REDOC_VERSION)," SHA256SUMS && sha256sum --quiet -c SHA256SUMS) || \
		{ echo "$(DOCS_ASSETS) is not redoc@$(REDOC_VERSION) as make docs-assets wrote it: run make docs-assets and commit"; exit 1; }

# PgBouncer and HAProxy from Debian, for deploy/ and the test that runs
# deploy/pgbouncer.ini in front of two instances.
pgbouncer:
	$(call apt,/usr/sbin/pgbouncer /usr/sbin/haproxy,pgbouncer haproxy)

# Patroni, etcd and HAProxy, for the highly available cluster (make ha and
# the failover tests), when missing.
patroni:
	$(call apt,/usr/bin/patroni /usr/bin/etcd /usr/sbin/haproxy,patroni etcd-server haproxy)

# Debian's Chromium, for the browser tests, make screenshots and make
# lighthouse, when missing.
chromium:
	$(call apt,/usr/bin/chromium,chromium)

$(NODE_STAMP):
	@command -v npm >/dev/null || { echo "npm is required for the spec linters and TypeScript checks: apt-get install nodejs npm"; exit 1; }
	npm install --prefix $(NODE_DIR) --no-audit --no-fund --loglevel=error $(NPM_TOOLS)
	@rm -f $(NODE_DIR)/.installed*; touch $@

# TypeScript types of openapi.yaml, and the typed openapi-fetch example.
ts-generate: $(NODE_STAMP)
	$(OPENAPI_TS) openapi.yaml --redocly client/ts/redocly.yaml -o client/ts/schema.d.ts

check-ts-generated: $(NODE_STAMP)
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(OPENAPI_TS) openapi.yaml --redocly client/ts/redocly.yaml -o "$$tmp/schema.d.ts" >/dev/null || exit 1; \
	if ! cmp -s "$$tmp/schema.d.ts" client/ts/schema.d.ts; then \
		echo "client/ts/schema.d.ts is out of date with openapi.yaml: run make ts-generate and commit it"; \
		diff -u client/ts/schema.d.ts "$$tmp/schema.d.ts" | head -20; exit 1; \
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

$(STATICCHECK):
	GOBIN=$(abspath $(dir $@)) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...

$(GOVULNCHECK):
	GOBIN=$(abspath $(dir $@)) $(GO) install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION)

# Known vulnerabilities in the code paths payreq calls, from the Go
# vulnerability database chosen as GOVULNDB above says; it prints which one.
# Any finding, or a database that fails to load, fails the target.
vulncheck: $(GOVULNCHECK)
	@if [ -n "$(GOVULNDB)" ]; then \
		db='$(GOVULNDB)'; echo "vulncheck: database $$db (GOVULNDB)"; \
	elif why=$$(curl -fsS --max-time 5 -o /dev/null https://vuln.go.dev/index/db.json 2>&1); then \
		db=https://vuln.go.dev; echo "vulncheck: database https://vuln.go.dev"; \
	else \
		commit=$$(sed -n 's/^commit: //p' $(VULNDB_SOURCE)); date=$$(sed -n 's/^date: //p' $(VULNDB_SOURCE)); \
		[ -n "$$commit" ] || { echo "vulncheck: no commit line in $(VULNDB_SOURCE)"; exit 1; }; \
		dir=.tools/vulndb-$$(printf '%.12s' "$$commit"); \
		if [ ! -d "$$dir" ]; then \
			for old in .tools/vulndb-*; do rm -rf "$$old"; done; \
			mkdir -p "$$dir.tmp" && tar -xzf $(VULNDB_SNAPSHOT) -C "$$dir.tmp" && mv "$$dir.tmp" "$$dir" || exit 1; \
		fi; \
		db="file://$(CURDIR)/$$dir"; \
		echo "vulncheck: vuln.go.dev not reachable ($$(printf '%s' "$$why" | tail -n 1)); database: snapshot of golang/vulndb at $$commit ($$date), $(VULNDB_SNAPSHOT)"; \
	fi; \
	$(GOVULNCHECK) -db "$$db" ./...

# Rebuilds $(VULNDB_SNAPSHOT) (every data/osv/*.json, byte for byte the same
# for the same commit) and $(VULNDB_SOURCE) from the HEAD of a golang/vulndb
# clone, then commit both:
#   git clone https://go.googlesource.com/vulndb /tmp/vulndb
#   make vulndb-snapshot VULNDB_REPO=/tmp/vulndb
vulndb-snapshot:
	@[ -n "$(VULNDB_REPO)" ] || { echo "usage: make vulndb-snapshot VULNDB_REPO=/path/to/a/clone/of/vulndb"; exit 1; }
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	commit=$$(git -C "$(VULNDB_REPO)" rev-parse --verify HEAD) && \
	date=$$(git -C "$(VULNDB_REPO)" log -1 --format=%cI HEAD) && \
	epoch=$$(git -C "$(VULNDB_REPO)" log -1 --format=%ct HEAD) && \
	git -C "$(VULNDB_REPO)" archive --format=tar HEAD:data/osv > "$$tmp/osv.tar" && \
	mkdir "$$tmp/osv" && tar -xf "$$tmp/osv.tar" -C "$$tmp/osv" && \
	count=$$(ls "$$tmp/osv" | grep -c '\.json$$') && \
	(cd "$$tmp/osv" && ls | grep '\.json$$' | LC_ALL=C sort > ../names && \
	 tar --create --format=gnu --no-recursion --files-from=../names --mtime=@$$epoch \
		--owner=0 --group=0 --numeric-owner --mode=u=rw,go=r) > "$$tmp/osv.out.tar" && \
	{ [ "$$count" -gt 0 ] && [ "$$(tar -tf "$$tmp/osv.out.tar" | wc -l)" -eq "$$count" ] || \
	  { echo "vulndb-snapshot: no data/osv/*.json in $(VULNDB_REPO), or not all of them archived"; exit 1; }; } && \
	mkdir -p $(dir $(VULNDB_SNAPSHOT)) && gzip -9 -n < "$$tmp/osv.out.tar" > "$$tmp/osv.tar.gz" && \
	mv "$$tmp/osv.tar.gz" $(VULNDB_SNAPSHOT) && \
	{ echo "Go vulnerability database snapshot for make vulncheck when https://vuln.go.dev cannot be reached:"; \
	  echo "osv.tar.gz holds data/osv/*.json of"; \
	  echo "repository: https://go.googlesource.com/vulndb"; \
	  echo "commit: $$commit"; \
	  echo "date: $$date"; \
	  echo "entries: $$count"; \
	  echo "refresh: git clone https://go.googlesource.com/vulndb /tmp/vulndb && make vulndb-snapshot VULNDB_REPO=/tmp/vulndb"; \
	} > $(VULNDB_SOURCE) && \
	echo "$(VULNDB_SNAPSHOT): $$count entries of golang/vulndb $$commit ($$date)"

# Runs every fuzz target (func Fuzz… in a _test.go file) for FUZZTIME, one at
# a time, since go test fuzzes one target per run. Each run starts from the
# committed seeds (f.Add and testdata/fuzz/<target>/), so its time is the
# same every run: the inputs earlier runs found are dropped from Go's cache
# first. A failing input is written to testdata/fuzz/<target>/: commit it
# with the fix. For a longer hunt: go test -run '^$$' -fuzz '^FuzzX$$' -fuzztime 10m ./pkg
fuzz: postgres
	@rm -rf "$$($(GO) env GOCACHE)/fuzz/$$($(GO) list -m)"
	@grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' cmd internal client examples | sort | \
	while IFS=: read -r file fn; do \
		name=$${fn#func }; pkg=./$$(dirname "$$file"); \
		echo "fuzz $$name in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 20x $$pkg >"$${TMPDIR:-/tmp}/payreq-fuzz.log" 2>&1 \
			|| { cat "$${TMPDIR:-/tmp}/payreq-fuzz.log"; exit 1; }; \
		grep 'execs:' "$${TMPDIR:-/tmp}/payreq-fuzz.log" | tail -n 1; \
	done

db-stop: build
	./$(BIN) db-stop

clean:
	rm -rf bin .tools

# The portal's screenshots (docs/portal/*.png, shown in docs/portal.md), written by the
# portal's browser tests in headless Chromium.
screenshots: postgres chromium $(NODE_STAMP)
	PAYREQ_WRITE_SCREENSHOTS=1 $(GO) test -count=1 -run 'InChromium$$' ./internal/portal/
