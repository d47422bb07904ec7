# drover build tooling. `make` (or `make help`) lists the targets.
# CI runs exactly `make test` (see .ci/run).

GO       ?= go
GOFMT    ?= $(shell $(GO) env GOROOT)/bin/gofmt
BUF      := $(GO) run github.com/bufbuild/buf/cmd/buf@v1.70.0
# Latest tagged staticcheck served by the module proxy.
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
# golang.org/x/perf has no tagged releases; this is the newest pseudo-version
# the proxy serves.
BENCHSTAT := $(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da

BIN      := bin/drover
# VERSION overrides the release number compiled in (internal/version); a
# release takes it from an exact vX.Y.Z tag on HEAD when unset.
VERSION  ?=
VERSION_PKG := github.com/droverhq/drover/internal/version
# The commit (marked -dirty with uncommitted changes) and its date, not the
# time of the build: two builds of one commit are the same bytes.
GIT_COMMIT := $(shell git rev-parse HEAD 2>/dev/null)
GIT_DIRTY  := $(if $(GIT_COMMIT),$(shell git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo -dirty))
BUILD_DATE := $(shell git log -1 --format=%cI 2>/dev/null)
LDFLAGS  := -s -w -buildid= -X $(VERSION_PKG).Commit=$(GIT_COMMIT)$(GIT_DIRTY) -X $(VERSION_PKG).BuildDate=$(BUILD_DATE) \
	$(if $(VERSION),-X $(VERSION_PKG).Version=$(VERSION))
# `make install` puts drover in $(DESTDIR)$(PREFIX)/bin.
PREFIX   ?= /usr/local
RELEASE_PLATFORMS := linux/amd64 linux/arm64

# Per fuzz target, in `make fuzz` (and so in `make test`): a count of
# executions, not a duration. With a duration, Go's fuzzing coordinator can
# end a clean run with "context deadline exceeded" when its deadline falls
# while a worker is still minimising an input, which failed a CI run on
# FuzzParse without any failing input.
FUZZTIME ?= 50000x
# buf breaking compares proto/ against this local branch when it exists.
BREAKING_BRANCH ?= main

.DEFAULT_GOAL := help
# The long fault sweep of `make chaos`: flags of test/chaos (see docs/reliability.md).
CHAOS_ARGS ?= -chaos.rounds=5 -chaos.hold=15s -chaos.calm=5s -chaos.seeds=2

.PHONY: help build run install release test fmt-check vet go-test chaos-sweep chaos fuzz proto proto-check lint bench bench-ui tidy clean ui-vendor ui-screenshots chromium

help: ## Show this help
	@echo 'Usage: make <target> [VAR=value]'
	@echo
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo
	@echo 'Variables: GO=$(GO) FUZZTIME=$(FUZZTIME) VERSION=$(VERSION) BREAKING_BRANCH=$(BREAKING_BRANCH)'

build: ## Build the static binary bin/drover (commit and its date stamped; VERSION=x.y.z sets the release)
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/drover

run: build ## Run a dev server, 5 simulated nodes and a sample job in the foreground (Ctrl-C stops all, removes the data)
	./$(BIN) dev

install: build ## Put drover on PATH: $(DESTDIR)$(PREFIX)/bin/drover (PREFIX=/usr/local; PREFIX=$$HOME/.local without root)
	install -d '$(DESTDIR)$(PREFIX)/bin'
	install -m 0755 $(BIN) '$(DESTDIR)$(PREFIX)/bin/drover'
	@echo "install: $(DESTDIR)$(PREFIX)/bin/drover: $$('$(DESTDIR)$(PREFIX)/bin/drover' version)"

release: ## Reproducible static binaries for $(RELEASE_PLATFORMS) in dist/ with SHA256SUMS (VERSION=x.y.z, or an exact vX.Y.Z tag)
	@version='$(VERSION)'; \
	if [ -z "$$version" ]; then version=$$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null | sed 's/^v//'); fi; \
	if [ -z "$$version" ]; then echo 'release: set VERSION=x.y.z or tag HEAD vX.Y.Z'; exit 2; fi; \
	if [ -n '$(GIT_DIRTY)' ]; then echo 'release: the checkout has uncommitted changes; commit them first'; exit 2; fi; \
	rm -rf dist && mkdir -p dist && \
	for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; out="dist/drover_$${version}_$${os}_$${arch}"; \
		echo "release: $$out"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -buildvcs=false \
			-ldflags '$(LDFLAGS) -X $(VERSION_PKG).Version='"$$version" -o "$$out" ./cmd/drover || exit 1; \
	done && \
	cd dist && sha256sum drover_* > SHA256SUMS && cat SHA256SUMS

test: ## Everything CI runs: fmt-check, vet, proto-check, go test -race, the short fault sweep, fuzz
	@$(MAKE) --no-print-directory fmt-check
	@$(MAKE) --no-print-directory vet
	@$(MAKE) --no-print-directory proto-check
	@$(MAKE) --no-print-directory go-test
	@$(MAKE) --no-print-directory chaos-sweep
	@$(MAKE) --no-print-directory fuzz

fmt-check: ## Fail if gofmt -l lists any non-generated .go file
	@files=$$(find . -type f -name '*.go' ! -name '*.pb.go' \
		! -path './.git/*' ! -path '*/testdata/*' ! -path './vendor/*' -print | sort); \
	out=$$(echo "$$files" | xargs -r $(GOFMT) -l) || exit 1; \
	if [ -n "$$out" ]; then \
		echo 'fmt-check: these files are not gofmt-formatted (run gofmt -w on them):'; \
		echo "$$out" | sed 's/^/  /'; \
		exit 1; \
	fi; \
	echo 'fmt-check: ok'

vet: ## go vet ./...
	$(GO) vet ./...

go-test: chromium ## go test -race on all packages but the fault suite (part of test)
	$(GO) test -race -count=1 -timeout 15m $$($(GO) list ./... | grep -v '/test/chaos$$')

chaos-sweep: ## The fault suite, short: every fault once (part of test; runs alone, it starts many servers)
	$(GO) test -race -count=1 -timeout 20m ./test/chaos/

chaos: ## The fault suite, long (CHAOS_ARGS); failing runs leave artifacts in DROVER_CHAOS_ARTIFACTS
	$(GO) test -count=1 -timeout 12h -v ./test/chaos/ -args $(CHAOS_ARGS)

fuzz: ## Run every Go fuzz target for FUZZTIME executions (default 50000x) each
	@targets=$$(grep -rE --include='*_test.go' --exclude-dir=.git --exclude-dir=testdata --exclude-dir=vendor \
		'^func Fuzz[A-Za-z0-9_]*\([A-Za-z0-9_]+ \*testing\.F\)' . \
		| sed -E 's|^\./(.*)/[^/]*:func (Fuzz[A-Za-z0-9_]*)\(.*|\1 \2|; s|^\./[^/]*:func (Fuzz[A-Za-z0-9_]*)\(.*|. \1|' \
		| sort -u); \
	if [ -z "$$targets" ]; then echo 'fuzz: no fuzz targets found'; exit 0; fi; \
	echo "$$targets" | while read -r dir name; do \
		echo "fuzz: $$name in ./$$dir for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) "./$$dir" || exit 1; \
	done

proto: ## Regenerate Go code next to the .proto files (buf generate)
	$(BUF) generate

proto-check: ## buf lint, buf breaking vs branch main, and fail if generated code is stale/uncommitted
	$(BUF) lint
	@if git rev-parse --verify --quiet 'refs/heads/$(BREAKING_BRANCH)' >/dev/null \
		&& [ -n "$$(git ls-tree -d '$(BREAKING_BRANCH)' -- proto 2>/dev/null)" ]; then \
		echo "$(BUF) breaking --against '.git#branch=$(BREAKING_BRANCH)'"; \
		$(BUF) breaking --against '.git#branch=$(BREAKING_BRANCH)'; \
	else \
		echo "proto-check: no branch '$(BREAKING_BRANCH)' with a proto/ dir to compare against; skipping buf breaking"; \
	fi
	$(BUF) generate
	@changed=$$(git status --porcelain --untracked-files=all -- proto/); \
	if [ -n "$$changed" ]; then \
		echo 'proto-check: FAILED: generated code in proto/ differs from what is committed.'; \
		echo '  Either the generated Go code is stale or files are not committed.'; \
		echo '  Run `make proto`, review, and commit proto/. Changed or untracked:'; \
		echo "$$changed" | sed 's/^/    /'; \
		exit 1; \
	fi; \
	echo 'proto-check: ok (generated code is up to date and committed)'

lint: ## staticcheck ./... (developer tool; not part of test)
	$(STATICCHECK) ./...

bench: ## The benchmarks of docs/benchmarks.md (5 runs each) into bench.out, then benchstat medians
	@{ $(GO) test -run '^$$' -bench 'Register|GRPCFloor|Wakeup|GetAllocsAnswer' -benchtime 20000x -count 5 ./rpc/ && \
	   $(GO) test -run '^$$' -bench 'MemoryPerAlloc' -benchtime 1x -count 5 ./fsm/state/ && \
	   $(GO) test -run '^$$' -bench 'PlanResult1000' -benchtime 50x -count 5 ./fsm/state/ && \
	   $(GO) test -run '^$$' -bench 'ClientUpdates$$|JobAllocsRead|AllocIndex' -benchmem -count 5 ./fsm/state/ && \
	   $(GO) test -run '^$$' -bench . -benchmem -count 5 ./fsm/events/ && \
	   $(GO) test -run '^$$' -bench 'ClusterWrites' -benchtime 10000x -count 5 ./test/ && \
	   $(GO) test -run '^$$' -bench '^BenchmarkFailover$$' -benchtime 10x -count 1 ./test/ && \
	   $(GO) test -run '^$$' -bench 'Heartbeats|Failover10k' -benchtime 1x -count 3 -timeout 60m ./test/ && \
	   $(GO) test -run '^$$' -bench 'WipedServerCatchUp100k' -benchtime 1x -count 5 ./server/ && \
	   $(GO) test -run '^$$' -bench 'PlaceService' -benchtime 10x -count 5 ./scheduler/ && \
	   $(GO) test -run '^$$' -bench 'PlaceManyJobs|PassesFromOneSnapshot' -benchtime 20x -count 5 ./scheduler/ && \
	   $(GO) test -run '^$$' -bench 'PlacementsEndToEnd' -benchtime 5x -count 3 ./test/ && \
	   $(GO) test -run '^$$' -bench 'JobsList' -benchtime 2000x -count 5 ./test/ ; } > bench.out 2>&1; \
	status=$$?; cat bench.out; \
	if [ $$status -ne 0 ]; then exit $$status; fi
	$(BENCHSTAT) bench.out
	@echo
	@echo 'bench: raw results are in bench.out; record the numbers (and the machine) in docs/benchmarks.md.'

# The web UI's topology view with 5,000 simulated nodes (docs/benchmarks.md):
# TestUITopology loads the page UI_RUNS times and logs each first render,
# their medians, and the update times of nodes changed through the API.
UI_NODES ?= 5000
UI_RUNS  ?= 5
bench-ui: chromium ## The topology view with UI_NODES (5,000) simulated nodes: first render and update times into bench-ui.out
	@DROVER_UI_TOPOLOGY_NODES=$(UI_NODES) DROVER_UI_TOPOLOGY_RUNS=$(UI_RUNS) \
		$(GO) test -count=1 -timeout 30m -run '^TestUITopology$$' -v ./test/ > bench-ui.out 2>&1; \
	status=$$?; grep -E 'topology:|simulated nodes ready|jobs placed|^(--- |ok|FAIL|panic)' bench-ui.out; \
	if [ $$status -ne 0 ]; then echo 'bench-ui: FAILED; the whole output is in bench-ui.out'; exit $$status; fi; \
	echo 'bench-ui: the whole output is in bench-ui.out; record the medians (and the machine) in docs/benchmarks.md.'

tidy: ## go mod tidy
	$(GO) mod tidy

# The web UI's third-party modules (docs/ui.md, docs/dependencies.md): npm
# tarballs pinned by version and sha512 (the registry's "integrity"), one
# file taken from each. The files are committed, so build and test need no
# network; `make ui-vendor` refetches them after a pin changes. The bare
# import "preact" becomes "./preact.mjs", so no import map (an inline script
# the Content-Security-Policy would have to allow) is needed.
UI_VENDOR := server/httpapi/ui/assets/vendor
# name version sha512-base64 file-in-package output
UI_PKGS := \
	preact 11.2.0 /HfHI/7N84e6GrWBJ3J280z3mLaRJiDcSvj/A+y/4AbLnND/1UlGHe1sR6oYuTGwId0nP7dqDU9OnLxMPZ7xBg== dist/preact.mjs preact.mjs \
	preact 11.2.0 /HfHI/7N84e6GrWBJ3J280z3mLaRJiDcSvj/A+y/4AbLnND/1UlGHe1sR6oYuTGwId0nP7dqDU9OnLxMPZ7xBg== hooks/dist/hooks.mjs preact-hooks.mjs \
	htm 3.1.1 983Vyg8NwUE7JkZ6NmOqpCZ+sh1bKv2iYTlUkzlWmA5JD2acKoxd4KVxbMmxX/85mtfdnDmTFoNKcg5DGAvxNQ== dist/htm.module.js htm.mjs

ui-vendor: ## Fetch the UI's pinned npm modules, check their sha512, extract into server/httpapi/ui/assets/vendor
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	set -- $(UI_PKGS); \
	while [ $$# -ge 5 ]; do \
		name=$$1 ver=$$2 sum=$$3 file=$$4 out=$$5; shift 5; \
		tgz="$$tmp/$$name-$$ver.tgz"; \
		[ -f "$$tgz" ] || curl -fsSL -o "$$tgz" "https://registry.npmjs.org/$$name/-/$$name-$$ver.tgz"; \
		got=$$(openssl dgst -sha512 -binary "$$tgz" | base64 -w0); \
		if [ "$$got" != "$$sum" ]; then echo "ui-vendor: $$name@$$ver: sha512 $$got, want $$sum"; exit 1; fi; \
		tar -xzf "$$tgz" -C "$$tmp" "package/$$file"; \
		{ echo "// $$name@$$ver $$file, from the npm registry (make ui-vendor)."; \
		  sed 's|from"preact"|from"./preact.mjs"|g' "$$tmp/package/$$file"; } > $(UI_VENDOR)/$$out; \
		echo "ui-vendor: $$name@$$ver $$file -> $(UI_VENDOR)/$$out"; \
	done

ui-screenshots: chromium ## Run the browser tests writing each view's screenshot to docs/ui/ (for docs/ui.md)
	DROVER_UI_SCREENSHOTS=$(CURDIR)/docs/ui $(GO) test -count=1 -run '^TestUI' ./test/

chromium: ## Install Debian's chromium for the browser tests when missing (as root; part of go-test)
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo 'chromium: not found; apt-get install -y chromium'; \
		{ apt-get install -y chromium || { apt-get update && apt-get install -y chromium; }; } >/dev/null 2>&1 \
			|| echo 'chromium: apt-get install failed: the browser tests (TestUI*) will skip'; \
	else \
		echo 'chromium: not found and not root with apt-get: the browser tests (TestUI*) will skip'; \
	fi

clean: ## Remove bin/, bench.out and bench-ui.out
	rm -rf bin bench.out bench-ui.out
