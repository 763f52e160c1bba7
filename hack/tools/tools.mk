# Test control-plane tools. Include from the top-level Makefile:
#
#   include hack/tools/tools.mk
#
# `make tools` builds kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl (k8s.io/kubernetes v1.36.3), etcd (v3.6.16) and kwok (v0.8.0) plus
# kwok's stock stages, and controller-gen (controller-tools v0.21.0, for
# `make generate`), into bin/ (or $CORRAL_BIN). Cached: a no-op when bin/
# is complete and bin/.tools-version matches hack/tools/build.sh.
# See docs/dev/control-plane.md.

TOOLS_MK_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))

.PHONY: tools tools-rebuild

tools: ## Build the integration-test control plane into bin/ (first time ~10-15 min)
	bash $(TOOLS_MK_DIR)/build.sh

tools-rebuild: ## Rebuild every control-plane tool, ignoring the cache stamp
	FORCE=1 bash $(TOOLS_MK_DIR)/build.sh
