package kube

import (
	"strings"
	"testing"
)

func TestReadManifests(t *testing.T) {
	const node = `apiVersion: v1
kind: Node
metadata: {name: n1, labels: {corral.dev/rack: r1}}
status: {allocatable: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "4"}}
`
	cases := map[string]struct {
		in      string
		nodes   int
		levels  int
		wantErr string
	}{
		"one node":            {in: node, nodes: 1},
		"kubectl List":        {in: "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSpace(node), "\n", "\n  ") + "\n", nodes: 1},
		"node and topology":   {in: node + "---\napiVersion: corral.dev/v1alpha1\nkind: Topology\nmetadata: {name: t}\nspec: {levels: [{name: rack, nodeLabel: corral.dev/rack}]}\n", nodes: 1, levels: 1},
		"another kind":        {in: node + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", wantErr: `document 2: kind "Pod": want Node or Topology`},
		"no nodes":            {in: "apiVersion: v1\nkind: List\nitems: []\n", wantErr: "no Node objects"},
		"misspelt node field": {in: strings.Replace(node, "allocatable", "allocatible", 1), wantErr: "document 1: Node"},
		"two topologies": {in: node + strings.Repeat("---\napiVersion: corral.dev/v1alpha1\nkind: Topology\nmetadata: {name: t}\nspec: {levels: [{name: rack, nodeLabel: corral.dev/rack}]}\n", 2),
			wantErr: "a second Topology"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := ReadManifests(strings.NewReader(tc.in), "f.yaml")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Nodes) != tc.nodes || len(m.Nodes[0].Devices) != 4 || m.Nodes[0].Unschedulable {
				t.Errorf("nodes %+v", m.Nodes)
			}
			if got := 0; m.Topology != nil {
				got = len(m.Topology.Levels)
				if got != tc.levels {
					t.Errorf("%d levels, want %d", got, tc.levels)
				}
			} else if tc.levels != 0 {
				t.Errorf("no topology, want %d levels", tc.levels)
			}
		})
	}
	if IsManifest([]byte("name: small\nlevels: []\n")) || !IsManifest([]byte(node)) {
		t.Error("IsManifest tells a corral cluster file from a Node wrongly")
	}
}
