# corral: `make test` is the whole suite, as CI runs it (.ci/run).
GO      ?= go
PKGS    := $(shell $(GO) list ./... 2>/dev/null | grep -v /test/integration)
FUZZTIME ?= 10s
# The release a build says it is (corral version, corral_build_info, reports):
# the nearest tag, e.g. v0.2.0 or v0.2.0-3-gabc1234, "-dirty" with local edits.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X github.com/corral-dev/corral/internal/version.version=$(VERSION)

.PHONY: all build sim test lint unit integration fuzz bench help chromium

all: build

build: ## Build bin/corral (and bin/kubectl-corral, the kubectl plugin name), stamped with VERSION
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/corral ./cmd/corral
	ln -sf corral bin/kubectl-corral

sim: ## Run the embedded default simulation
	$(GO) run ./cmd/corral sim

test: lint unit chart-test image-test integration ## Everything CI runs: lint, unit tests, chart and image checks, integration tests on a real control plane

lint: ## gofmt and go vet
	@out=$$(gofmt -l cmd internal api test data hack charts/test 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd hack/image && $(GO) vet ./...

unit: chromium ## Unit tests of every package but the integration suite
	$(GO) test -count=1 $(PKGS)

# The report's in-browser checks (internal/report/browser_test.go) need
# Chromium. Installed once with apt-get when it is missing and we may; when
# it cannot be, the test skips and says so.
chromium: ## Install Debian's chromium for the report's browser checks, if missing
	@if [ -n "$$CORRAL_CHROMIUM" ] || command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing chromium for the report's browser checks"; \
		apt-get install -y chromium >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y chromium >/dev/null 2>&1; } || \
		echo "chromium could not be installed: TestReportInBrowser will skip"; \
	else echo "no chromium, and apt-get needs root: TestReportInBrowser will skip (apt-get install -y chromium)"; fi

# ./test/integration/... is two packages that go test runs at once, each on
# its own control plane: the suite, and test/integration/soak (a cluster
# held 10 minutes with running gangs), so the soak does not add its 10
# minutes to the suite's wall time (docs/dev/control-plane.md).
integration: tools ## Integration tests against kube-apiserver + etcd + controller-manager + kwok (+ JobSet, LWS, KubeRay, Kueue), and the 10-minute soak beside them
	bash hack/tools/controllers.sh jobset lws kuberay kueue
	$(GO) test -count=1 -p 2 -timeout 30m ./test/integration/...

fuzz: ## Short fuzzing runs of the trace and cluster readers
	@for f in FuzzReadOpenbCSV FuzzReadJobTraceCSV FuzzReadJobTraceYAML FuzzReadClusterYAML FuzzReadPhilly; do \
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

generate: controller-gen ## Regenerate deepcopy code and the CRD manifests in deploy/crds (and the chart's copy)
	@for p in $(API_PKGS); do $(CONTROLLER_GEN) object paths=./$$p || exit 1; done
	$(CONTROLLER_GEN) crd $(foreach p,$(API_PKGS),paths=./$(p)) output:crd:artifacts:config=deploy/crds
	cp deploy/crds/*.yaml charts/corral/crds/

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

# ---------------------------------------------------------------- image and release
# hack/image (its own module, go-containerregistry pinned there) assembles the
# image from scratch: the static binary, Debian's CA bundle, a nonroot user.
# No Docker daemon, no base image, no registry is needed to build it.
IMAGE_REPO     ?= ghcr.io/corral-dev/corral
IMAGE_PLATFORM ?= linux/amd64
IMAGE_CREATED  ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)

.PHONY: image image-test

image: ## Build the image $(IMAGE_REPO):$(VERSION) into dist/oci (OCI layout) and dist/corral-image.tar, no Docker daemon
	@mkdir -p dist/$(IMAGE_PLATFORM)
	CGO_ENABLED=0 GOOS=$(word 1,$(subst /, ,$(IMAGE_PLATFORM))) GOARCH=$(word 2,$(subst /, ,$(IMAGE_PLATFORM))) \
		$(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o dist/$(IMAGE_PLATFORM)/corral ./cmd/corral
	cd hack/image && $(GO) run . -binary ../../dist/$(IMAGE_PLATFORM)/corral -version $(VERSION) \
		-repo $(IMAGE_REPO) -platform $(IMAGE_PLATFORM) -created $(IMAGE_CREATED) -revision $(IMAGE_REVISION) \
		-layout ../../dist/oci -tarball ../../dist/corral-image.tar

image-test: ## Build the image in a test and check its config, files, and that its corral runs
	cd hack/image && $(GO) test -count=1 -timeout 30m ./...

# ---------------------------------------------------------------- Helm chart
# The chart test is a module of its own (charts/test): Helm v4.3.1 needs
# k8s.io v0.37 where corral pins v0.36, and compiling Helm would slow every
# go test ./... of the main module.
.PHONY: chart-test chart-crds

chart-crds: ## Copy deploy/crds into the chart (Helm reads only files inside it)
	cp deploy/crds/*.yaml charts/corral/crds/

chart-test: tools ## helm lint, helm template and helm install (into the test control plane) of charts/corral, with Helm's Go module
	cd charts/test && $(GO) test -count=1 -timeout 10m ./...

# ---------------------------------------------------------------- dashboard
.PHONY: dashboard

dashboard: ## Regenerate the Grafana dashboard (deploy/dashboards, charts/corral/dashboards) from internal/dashboard
	$(GO) run ./hack/dashboard

# ---------------------------------------------------------------- local cluster
.PHONY: dev-cluster
DEV_ARGS ?=

dev-cluster: tools ## A local kwok GPU cluster with corral scheduling it, until Ctrl-C (DEV_ARGS="--dra", see docs/kubernetes.md)
	$(GO) run ./cmd/corral dev up $(DEV_ARGS)
