# contextd. `make help` lists the targets.
SHELL := /bin/bash
GO    ?= go
# The code generators and linters live in their own module (tools/go.mod) so
# the product's go.mod stays small. CGO_ENABLED=0 builds sqlc without cgo
# (same output, faster first build); keep it fixed so `go tool` reuses its cache.
TOOL  := CGO_ENABLED=0 $(GO) tool -modfile=tools/go.mod
BIN   := bin/contextd
ARGS  ?=

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-z-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-10s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build bin/contextd
	$(GO) build -o $(BIN) ./cmd/contextd

.PHONY: run
run: build ## Start the server (embedded PostgreSQL unless DATABASE_URL is set)
	./$(BIN) serve $(ARGS)

# demo loads internal/demo's support desk into the server `make run` started
# (or CONTEXTD_URL's; ARGS=--project NAME, --url, --key); `contextd demo`
# says how to start one when none answers.
.PHONY: demo
demo: build ## Load the demo project (a support desk) into a running `make run` server (ARGS=--project NAME)
	./$(BIN) demo $(ARGS)

.PHONY: test
test: ## Run the whole suite against real PostgreSQL, with the race detector
	$(GO) test -race -count=1 -timeout 20m ./...

# The docs' runnable blocks (```sh run, see CONTRIBUTING.md) run against a
# fresh server built from this tree; the build tag keeps them out of
# `make test`, and .ci/run runs them after it.
.PHONY: docs-test
docs-test: ## Run the runnable blocks of README.md and docs/*.md against a fresh server (CONTRIBUTING.md, "Docs that run")
	$(GO) test -tags docstest -count=1 -timeout 15m -run '^TestDocs$$' ./internal/docstest/

# The explorer's browser tests (internal/ui, build tag uitest) drive a real
# headless Chromium, so `make test` leaves them out; CHROME_PATH names the
# browser when it is not on PATH as chromium.
.PHONY: test-ui
test-ui: ## Run the explorer's tests in headless Chromium (needs Debian's chromium: apt-get install chromium)
	@if [ -z "$$CHROME_PATH" ] && ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 && ! command -v google-chrome >/dev/null 2>&1; then \
		echo "make test-ui needs Chromium, and none was found: install it with 'apt-get install chromium' (Debian/Ubuntu), or set CHROME_PATH"; exit 1; fi
	$(GO) test -tags uitest -count=1 -timeout 10m ./internal/ui/...

.PHONY: bench
bench: build ## Run the benchmarks, then a short `contextd bench --floor` on the embedded default (.contextd-bench; ARGS=--reuse etc.)
	$(GO) test -run '^$$' -bench . -benchtime 3x ./...
	./$(BIN) bench --items 2000 --shared 200 --duration 10s --floor $(ARGS)

# bench-get-reference runs `contextd bench --only get` and LangGraph's own
# PostgresStore get (internal/bench/langgraph: Node.js >= 20 and npm) in
# turns, ROUNDS times, on DATABASE_URL, and prints each round's ratio: on a
# shared two-core machine only figures taken close together compare.
ROUNDS ?= 3
.PHONY: bench-get-reference
bench-get-reference: build ## contextd's item GET beside LangGraph's PostgresStore get, in turns (DATABASE_URL=..., ROUNDS=3; needs node and npm)
	@if [ -z "$(DATABASE_URL)" ]; then echo "make bench-get-reference needs DATABASE_URL: a database both may write to, e.g. postgres://postgres@127.0.0.1:5432/benchw?sslmode=disable"; exit 1; fi
	@command -v node >/dev/null && command -v npm >/dev/null || { echo "make bench-get-reference needs Node.js >= 20 and npm (apt-get install nodejs npm)"; exit 1; }
	cd internal/bench/langgraph && npm ci --no-audit --no-fund --silent
	@for i in $$(seq $(ROUNDS)); do \
		c=$$(./$(BIN) bench --database-url "$(DATABASE_URL)" --only get --reuse --duration 16s 2>/dev/null | awk '$$1 == "get" && $$2 != "floor" { print $$3 }'); \
		l=$$(node internal/bench/langgraph/get.mjs --database-url "$(DATABASE_URL)" --duration 10 | awk '$$1 == "langgraph" { print $$4 }'); \
		if [ -z "$$c" ] || [ -z "$$l" ]; then echo "round $$i: a run failed (contextd: '$$c', langgraph: '$$l')"; exit 1; fi; \
		awk -v i=$$i -v c=$$c -v l=$$l 'BEGIN { printf "round %d: contextd get %.0f/s, langgraph PostgresStore get %.0f/s, ratio %.2f\n", i, c, l, c / l }'; \
	done

# FUZZTIME is how long `make fuzz` runs each fuzz target.
FUZZTIME ?= 10s

.PHONY: fuzz
fuzz: ## Run every fuzz target briefly, one at a time (FUZZTIME=10s each; seed corpora in testdata/fuzz)
	@failed=""; \
	for t in $$(grep -rEo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' internal cmd | \
			sed -E 's|^(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]+).*|\1:\2|' | sort -u); do \
		dir=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name ./$$dir ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) ./$$dir || failed="$$failed $$name"; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz targets that failed:$$failed"; exit 1; fi

.PHONY: generate
generate: ## Regenerate sqlc and oapi-codegen output (the server's api and the Go client api/client), and the tokenizers' ranks
	$(TOOL) sqlc generate
	$(GO) run ./internal/token/internal/vocabgen internal/token
	$(TOOL) oapi-codegen -config api/oapi-codegen.yaml api/openapi.yaml
	$(TOOL) oapi-codegen -config api/client/oapi-codegen.yaml api/openapi.yaml

.PHONY: verify
verify: generate ## Regenerate and fail if the generated code differs from what is committed, or an operation lacks x-contextd-permission
	@git add -N api internal/store/internal/dbsqlc internal/token/*.ranks >/dev/null 2>&1 || true
	@if ! git diff --quiet -- api internal/store/internal/dbsqlc internal/token/*.ranks; then \
		echo "generated code is out of date; run 'make generate' and commit:"; \
		git --no-pager diff --stat -- api internal/store/internal/dbsqlc internal/token/*.ranks; exit 1; fi
	@echo "generated code is current"
	$(GO) test -count=1 -run '^TestEveryOperationDeclaresItsPermission$$' ./internal/archtest/

.PHONY: lint
lint: ## gofmt, go vet and staticcheck
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "not gofmt'ed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(TOOL) staticcheck ./...

.PHONY: migrate
migrate: build ## Apply migrations (make migrate ARGS=status|down)
	./$(BIN) migrate $(if $(ARGS),$(ARGS),up)
