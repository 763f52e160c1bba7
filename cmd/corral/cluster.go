package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/kube"
	"github.com/corral-dev/corral/internal/trace"
)

// loadCluster reads --cluster: a preset or corral cluster file (package
// trace), or a file of Kubernetes Node manifests (examples/sample-cluster.yaml,
// `kubectl get nodes -o yaml`), converted as the scheduler converts its
// Nodes. topology, if set, is a file with a Topology object giving the
// levels; a Topology in the cluster file itself does too.
func loadCluster(spec, topology string) (*trace.ClusterSpec, error) {
	manifest := false
	if ext := strings.ToLower(filepath.Ext(spec)); ext == ".yaml" || ext == ".yml" || ext == ".json" {
		if b, err := os.ReadFile(spec); err == nil {
			manifest = kube.IsManifest(b)
		}
	}
	if !manifest {
		if topology != "" {
			return nil, fmt.Errorf("--topology applies to a --cluster of Kubernetes Node manifests; %s is not one (a corral cluster file names its levels itself)", spec)
		}
		return trace.LoadCluster(spec)
	}
	m, err := readManifestFile(spec)
	if err != nil {
		return nil, err
	}
	topo := m.Topology
	if topology != "" {
		t, err := readManifestTopology(topology)
		if err != nil {
			return nil, err
		}
		if topo != nil {
			return nil, fmt.Errorf("--topology %s: %s has a Topology object already: give one", topology, spec)
		}
		topo = t
	}
	out := &trace.ClusterSpec{Name: filepath.Base(spec), Nodes: m.Nodes}
	if topo != nil {
		out.Topology = *topo
	}
	for _, w := range m.Warnings {
		fmt.Fprintf(os.Stderr, "%s: %s\n", spec, w)
	}
	if _, err := cluster.New(out.Topology, out.Nodes); err != nil {
		return nil, fmt.Errorf("%s: %w", spec, err)
	}
	return out, nil
}

func readManifestFile(path string) (*kube.Manifests, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return kube.ReadManifests(f, path)
}

// readManifestTopology reads a file that holds one Topology object (and no
// nodes), such as examples/topology.yaml.
func readManifestTopology(path string) (*cluster.Topology, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--topology: %w", err)
	}
	defer f.Close()
	t, err := kube.ReadTopology(f, path)
	if err != nil {
		return nil, fmt.Errorf("--topology: %w", err)
	}
	return t, nil
}
