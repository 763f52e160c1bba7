// Package cluster is corral's model of the machines: nodes, their GPU devices with
// intra-node coordinates, the inter-node topology tree, and free capacity
// aggregated per topology domain. It does no I/O and imports nothing from k8s.io.
package cluster

import (
	"fmt"
	"strings"

	"github.com/corral-dev/corral/internal/mig"
)

// Device is one GPU with the coordinates that decide how well it talks to its
// neighbours inside the node.
type Device struct {
	ID     string // stable id within the node, e.g. "gpu3" or a UUID
	Model  string // e.g. "H100", "V100M32"
	MemMiB int64
	// Socket, NUMA and PCIeSwitch are the device's place in the host's PCIe tree;
	// devices sharing a PCIe switch also share its NIC.
	Socket     int
	NUMA       int
	PCIeSwitch int
	// NVLink groups devices joined by NVLink or one NVSwitch; -1 when none.
	NVLink int
	// NIC is the network interface under the same PCIe switch, "" if none.
	NIC       string
	Unhealthy bool

	// MIG names the MIG geometry (a mig.Model name such as "A100-40GB")
	// when the GPU runs in MIG mode, "" otherwise. A MIG GPU serves only
	// requests for MIG instances, and a non-MIG GPU never serves them.
	MIG string
	// MIGLayout is the instances the MIG GPU is partitioned into now.
	MIGLayout mig.Layout
	// MIGPending says a re-partition into MIGWanted was asked of the node's
	// MIG manager and the node does not report it yet: nothing is bound to
	// the GPU until it does.
	MIGPending bool
	MIGWanted  mig.Layout
}

// ModelKey is the name the device is accounted under. A MIG GPU is not the
// same resource as a whole one: "A100" and "A100 (MIG A100-80GB)"; the
// geometry is named unless the model already is it ("A100-80GB (MIG)"), so
// one model name in MIG mode never covers two geometries.
func (d *Device) ModelKey() string {
	switch d.MIG {
	case "":
		return d.Model
	case d.Model:
		return d.Model + " (MIG)"
	}
	return d.Model + " (MIG " + d.MIG + ")"
}

// MIGBaseModel is the GPU model of a MIG model key, and whether it is one.
func MIGBaseModel(key string) (string, bool) {
	base, _, ok := strings.Cut(key, " (MIG")
	return base, ok
}

// MaxCoordinate bounds a device's socket, NUMA, PCIe switch and NVLink
// numbers within its node, so that sets of them fit in a machine word.
const MaxCoordinate = 62

// Node is a machine. Labels carry its inter-node topology coordinates.
type Node struct {
	Name          string
	CPUMilli      int64
	MemMiB        int64
	Devices       []Device
	Labels        map[string]string
	Unschedulable bool // cordoned or not ready: nothing new lands here
	// Taints are the node's taints as the driver read them. The engine does
	// not match tolerations itself: the driver does (with Kubernetes' own
	// helpers) and hands each request the nodes it may use
	// (workload.NodeFilter). They are kept for explanations and reports.
	Taints []Taint
}

// Taint is a node taint as plain data: Effect is "NoSchedule",
// "PreferNoSchedule" or "NoExecute".
type Taint struct {
	Key, Value, Effect string
}

// String renders a taint as kubectl does: key=value:Effect.
func (t Taint) String() string {
	if t.Value == "" {
		return t.Key + ":" + t.Effect
	}
	return t.Key + "=" + t.Value + ":" + t.Effect
}

// Validate reports a node no scheduler could use as described.
func (n *Node) Validate() error {
	switch {
	case n.Name == "":
		return fmt.Errorf("node has no name")
	case n.CPUMilli < 0:
		return fmt.Errorf("node %s: negative CPU %dm", n.Name, n.CPUMilli)
	case n.MemMiB < 0:
		return fmt.Errorf("node %s: negative memory %dMiB", n.Name, n.MemMiB)
	}
	seen := map[string]bool{}
	for i, d := range n.Devices {
		if d.ID == "" {
			return fmt.Errorf("node %s: device %d has no id", n.Name, i)
		}
		if seen[d.ID] {
			return fmt.Errorf("node %s: duplicate device id %q", n.Name, d.ID)
		}
		seen[d.ID] = true
		if d.Model == "" {
			return fmt.Errorf("node %s: device %s has no model", n.Name, d.ID)
		}
		if d.MIG != "" {
			geom, ok := mig.Lookup(d.MIG)
			if !ok {
				return fmt.Errorf("node %s: device %s: unknown MIG geometry %q", n.Name, d.ID, d.MIG)
			}
			if err := geom.Validate(d.MIGLayout); err != nil {
				return fmt.Errorf("node %s: device %s: MIG layout %s: %w", n.Name, d.ID, d.MIGLayout, err)
			}
			if d.MIGPending {
				if err := geom.Validate(d.MIGWanted); err != nil {
					return fmt.Errorf("node %s: device %s: wanted MIG layout %s: %w", n.Name, d.ID, d.MIGWanted, err)
				}
			}
		}
		for _, c := range []struct {
			name      string
			v, lo, hi int
		}{{"socket", d.Socket, 0, MaxCoordinate}, {"NUMA node", d.NUMA, 0, MaxCoordinate},
			{"PCIe switch", d.PCIeSwitch, 0, MaxCoordinate}, {"NVLink group", d.NVLink, -1, MaxCoordinate}} {
			if c.v < c.lo || c.v > c.hi {
				return fmt.Errorf("node %s: device %s: %s %d outside %d..%d", n.Name, d.ID, c.name, c.v, c.lo, c.hi)
			}
		}
	}
	return nil
}

// Level is one inter-node topology level, read from a node label.
type Level struct {
	Name  string // e.g. "rack"
	Label string // node label holding the node's domain at this level
}

// Topology lists the inter-node levels from the widest (e.g. "block") to the
// narrowest above the host (e.g. "rack"). The levels "cluster" (everything) and
// "host" (one node) are implicit.
type Topology struct {
	Levels []Level
}

// Implicit level names.
const (
	LevelCluster = "cluster"
	LevelHost    = "host"
)

// Validate checks that level names are unique and not the implicit ones.
func (t Topology) Validate() error {
	seen := map[string]bool{LevelCluster: true, LevelHost: true}
	for _, l := range t.Levels {
		if l.Name == "" || l.Label == "" {
			return fmt.Errorf("topology level %q needs a name and a node label", l.Name)
		}
		if seen[l.Name] {
			return fmt.Errorf("topology level %q is defined twice or shadows an implicit level", l.Name)
		}
		seen[l.Name] = true
	}
	return nil
}
