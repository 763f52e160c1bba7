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

integration: tools ## Integration tests against kube-apiserver + etcd + controller-manager + kwok (+ JobSet, LWS, KubeRay)
	bash hack/tools/controllers.sh jobset lws kuberay
	$(GO) test -count=1 -timeout 30m ./test/integration/...

fuzz: ## Short fuzzing runs of the trace and cluster readers
	@for f in FuzzReadOpenbCSV FuzzReadJobTraceCSV FuzzReadJobTraceYAML FuzzReadClusterYAML; do \
		$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./internal/trace/ || exit 1; done
	$(GO) test -run '^$$' -fuzz '^FuzzPodAnnotations$$' -fuzztime $(FUZZTIME) ./internal/kube/

bench: ## Engine benchmarks (see docs/benchmarks.md)
	$(GO) test -run '^$$' -bench . -benchtime 3x ./internal/engine/

help:
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

include hack/tools/tools.mk

# ---------------------------------------------------------------- code generation
# controller-gen (sigs.k8s.io/controller-tools, pinned in hack/tools/go.mod)
# writes zz_generated.deepcopy.go into each API package and the CRDs into
# deploy/crds/.
CONTROLLER_GEN ?= $(or $(CORRAL_BIN),$(CURDIR)/bin)/controller-gen
API_PKGS       := api/v1alpha1

.PHONY: generate verify-generate controller-gen

controller-gen: ## Build bin/controller-gen only (seconds, not the whole control plane)
	bash hack/tools/build.sh controller-gen

generate: controller-gen ## Regenerate deepcopy code and the CRD manifests in deploy/crds
	@for p in $(API_PKGS); do $(CONTROLLER_GEN) object paths=./$$p || exit 1; done
	$(CONTROLLER_GEN) crd $(foreach p,$(API_PKGS),paths=./$(p)) output:crd:artifacts:config=deploy/crds

verify-generate: controller-gen ## Fail if the generated code or CRDs are stale (regenerates into a temp dir)
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	for p in $(API_PKGS); do \
		mkdir -p "$$tmp/$$p" && \
		$(CONTROLLER_GEN) object paths=./$$p output:object:dir="$$tmp/$$p" && \
		diff -u $$p/zz_generated.deepcopy.go "$$tmp/$$p/zz_generated.deepcopy.go" || \
		{ echo "$$p: stale deepcopy code: run make generate"; exit 1; }; \
	done && \
	$(CONTROLLER_GEN) crd $(foreach p,$(API_PKGS),paths=./$(p)) output:crd:artifacts:config="$$tmp/crds" && \
	{ diff -ru deploy/crds "$$tmp/crds" || { echo "deploy/crds: stale CRDs: run make generate"; exit 1; }; } && \
	echo "generated files are up to date"

# ---------------------------------------------------------------- local cluster
.PHONY: dev-cluster
DEV_ARGS ?=

dev-cluster: tools ## A local kwok GPU cluster with corral scheduling it, until Ctrl-C (DEV_ARGS="--dra", see docs/kubernetes.md)
	$(GO) run ./cmd/corral dev up $(DEV_ARGS)
