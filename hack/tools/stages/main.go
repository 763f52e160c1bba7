// Command stages writes kwok's stage configurations to a directory, one
// YAML file per stage, so that the kwok controller can be started with one
// --config per file. They are kwok's stock stages (embedded in the
// sigs.k8s.io/kwok module) except pod-complete (pod-complete.yaml here): the
// stock fast one has no delay, so the pod-complete.stage.kwok.x-k8s.io/delay
// annotation that tests use to keep a Job's pods running was ignored.
//
// Usage: go run ./stages <output-dir>
package main

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

// podComplete is kwok's fast pod-complete stage with the general stage's
// annotation-driven delay (default: none).
//
//go:embed pod-complete.yaml
var podComplete string

var stages = []struct {
	file, content string
}{
	{"node-initialize.yaml", nodefast.DefaultNodeInit},
	{"node-heartbeat-with-lease.yaml", nodeheartbeat.DefaultNodeHeartbeatWithLease},
	{"pod-ready.yaml", podfast.DefaultPodReady},
	// pod-complete only fires for pods owned by a Job (stock kwok behaviour).
	{"pod-complete.yaml", podComplete},
	{"pod-delete.yaml", podfast.DefaultPodDelete},
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: stages <output-dir>")
		os.Exit(2)
	}
	dir := os.Args[1]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, s := range stages {
		if s.content == "" {
			fmt.Fprintf(os.Stderr, "stage %s is empty\n", s.file)
			os.Exit(1)
		}
		p := filepath.Join(dir, s.file)
		if err := os.WriteFile(p, []byte(s.content), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("wrote", p)
	}
}
