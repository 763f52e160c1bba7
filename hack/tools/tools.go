//go:build tools

// Package tools pins the upstream commands that hack/tools/build.sh builds into
// $(REPO)/bin (the test control plane, and controller-gen for
// `make generate`). The build tag keeps this file out of every real build; it only
// exists so that go.mod/go.sum record the modules, and `go build
// k8s.io/kubernetes/cmd/...` / `go build sigs.k8s.io/kwok/cmd/kwok` work from
// inside this module.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
