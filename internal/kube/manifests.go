package kube

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cluster"
)

// Manifests is what a file of Kubernetes objects says about a cluster: the
// nodes as the scheduler would see them (the same conversion a running
// scheduler applies to its informer's Nodes) and the topology levels of a
// Topology object. It lets `corral sim` replay on the cluster a user
// already has: `kubectl get nodes -o yaml > nodes.yaml`.
type Manifests struct {
	Nodes    []cluster.Node
	Topology *cluster.Topology // nil: no Topology object in the input
	Warnings []string
}

// IsManifest reports whether a YAML document looks like a Kubernetes object
// (it names an apiVersion and a kind) rather than a corral cluster file.
func IsManifest(b []byte) bool {
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	for {
		if err := d.Decode(&head); err != nil {
			return false
		}
		if head.Kind != "" || head.APIVersion != "" {
			return head.Kind != "" && head.APIVersion != ""
		}
	}
}

// ReadManifests reads a multi-document YAML (or a kubectl List) of Node and
// Topology objects. Other kinds are an error, so that a typo'd file is not
// read as an empty cluster. name places errors.
func ReadManifests(r io.Reader, name string) (*Manifests, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	out := &Manifests{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for doc := 1; ; doc++ {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("%s: document %d: %w", name, doc, err)
		}
		if len(obj) == 0 {
			continue // an empty document between ---
		}
		if err := out.add(obj, fmt.Sprintf("%s: document %d", name, doc)); err != nil {
			return nil, err
		}
	}
	if len(out.Nodes) == 0 {
		return nil, fmt.Errorf("%s: no Node objects", name)
	}
	return out, nil
}

// ReadTopology reads a file holding one Topology object and nothing else.
func ReadTopology(r io.Reader, name string) (*cluster.Topology, error) {
	m := &Manifests{}
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for doc := 1; ; doc++ {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("%s: document %d: %w", name, doc, err)
		}
		if len(obj) == 0 {
			continue
		}
		if kind, _ := obj["kind"].(string); kind != "Topology" {
			return nil, fmt.Errorf("%s: document %d: kind %q: want a Topology object", name, doc, kind)
		}
		if err := m.add(obj, fmt.Sprintf("%s: document %d", name, doc)); err != nil {
			return nil, err
		}
	}
	if m.Topology == nil {
		return nil, fmt.Errorf("%s: no Topology object", name)
	}
	return m.Topology, nil
}

func (m *Manifests) add(obj map[string]any, where string) error {
	kind, _ := obj["kind"].(string)
	b, err := yaml.Marshal(obj)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	switch kind {
	case "List", "NodeList":
		items, _ := obj["items"].([]any)
		for i, it := range items {
			o, ok := it.(map[string]any)
			if !ok {
				return fmt.Errorf("%s: item %d is not an object", where, i)
			}
			if err := m.add(o, fmt.Sprintf("%s, item %d", where, i)); err != nil {
				return err
			}
		}
	case "Node":
		var n corev1.Node
		if err := yaml.UnmarshalStrict(b, &n); err != nil {
			return fmt.Errorf("%s: Node: %w", where, err)
		}
		if len(n.Status.Conditions) == 0 {
			// A hand-written node (or one kwok will manage) has no status
			// yet: take it as Ready, as it will be once it joins.
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		}
		node, warnings := nodeFromObject(&n, "nvidia.com/gpu", nil, "")
		for _, w := range warnings {
			m.Warnings = append(m.Warnings, fmt.Sprintf("node %s: %s", n.Name, w))
		}
		m.Nodes = append(m.Nodes, node)
	case "Topology":
		var t v1alpha1.Topology
		if err := yaml.UnmarshalStrict(b, &t); err != nil {
			return fmt.Errorf("%s: Topology: %w", where, err)
		}
		if err := t.Validate(); err != nil {
			return fmt.Errorf("%s: Topology %s: %w", where, t.Name, err)
		}
		if m.Topology != nil {
			return fmt.Errorf("%s: a second Topology object (%s): give one", where, t.Name)
		}
		topo := &cluster.Topology{}
		for _, l := range t.Spec.Levels {
			topo.Levels = append(topo.Levels, cluster.Level{Name: l.Name, Label: l.NodeLabel})
		}
		m.Topology = topo
	default:
		return fmt.Errorf("%s: kind %q: want Node or Topology objects", where, kind)
	}
	return nil
}
