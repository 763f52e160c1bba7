# corral: `make test` is the whole suite, as CI runs it (.ci/run).
GO      ?= go
PKGS    := $(shell $(GO) list ./... 2>/dev/null | grep -v /test/integration)
FUZZTIME ?= 10s

.PHONY: all build sim test lint unit integration fuzz bench help

all: build

build: ## Build bin/corral
	$(GO) build -o bin/corral ./cmd/corral

sim: ## Run the embedded default simulation
	$(GO) run ./cmd/corral sim

test: lint unit integration ## Everything CI runs: lint, unit tests, integration tests on a real control plane

lint: ## gofmt and go vet
	@out=$$(gofmt -l cmd internal api test data 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

unit: ## Unit tests of every package but the integration suite
	$(GO) test -count=1 $(PKGS)

integration: tools ## Integration tests against kube-apiserver + etcd + controller-manager + kwok
	$(GO) test -count=1 -timeout 30m ./test/integration/...

fuzz: ## Short fuzzing runs of the trace and cluster readers
	@for f in FuzzReadOpenbCSV FuzzReadJobTraceCSV FuzzReadJobTraceYAML FuzzReadClusterYAML; do \
		$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./internal/trace/ || exit 1; done

bench: ## Engine benchmarks (see docs/benchmarks.md)
	$(GO) test -run '^$$' -bench . -benchtime 3x ./internal/engine/

help:
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

include hack/tools/tools.mk
