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

.PHONY: tools tools-rebuild controllers

# `make controllers` builds JobSet v0.11.1, LeaderWorkerSet v0.8.0, KubeRay
# ray-operator v1.6.0 and Kueue v0.17.0 from their modules, with their CRDs
# and webhook manifests, into bin/ (or $CORRAL_BIN); its own stamp
# bin/.controllers-version leaves `make tools` and its stamp alone.

tools: ## Build the integration-test control plane into bin/ (first time ~10-15 min)
	bash $(TOOLS_MK_DIR)/build.sh

tools-rebuild: ## Rebuild every control-plane tool, ignoring the cache stamp
	FORCE=1 bash $(TOOLS_MK_DIR)/build.sh

controllers: ## Build the batch controllers the integration tests run (JobSet, LWS, KubeRay, Kueue; ~8 min each cold)
	bash $(TOOLS_MK_DIR)/controllers.sh
