package trace

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/mig"
)

// The YAML cluster file (docs/formats.md, "Cluster file").
type clusterFileYAML struct {
	Name   string      `yaml:"name"`
	Levels []levelYAML `yaml:"levels"`
	Groups []groupYAML `yaml:"groups"`
}

type levelYAML struct {
	Name  string `yaml:"name"`
	Label string `yaml:"label"`
}

type groupYAML struct {
	Name          string            `yaml:"name"`  // pattern
	Count         *int              `yaml:"count"` // nil: 1
	CPUMilli      int64             `yaml:"cpu_milli"`
	MemMiB        int64             `yaml:"memory_mib"`
	Labels        map[string]string `yaml:"labels"` // values are patterns
	GPUs          *gpusYAML         `yaml:"gpus"`
	Unschedulable bool              `yaml:"unschedulable"`
}

type gpusYAML struct {
	Model   string       `yaml:"model"`
	MemMiB  int64        `yaml:"memory_mib"`
	Count   int          `yaml:"count"`
	Layout  string       `yaml:"layout"`
	Devices []deviceYAML `yaml:"devices"`
	// MIG runs every GPU in MIG mode with this geometry (e.g. "A100-80GB"),
	// partitioned as MIGLayout ("3g.40gb@0,3g.40gb@4"; empty: no instances).
	MIG       string `yaml:"mig"`
	MIGLayout string `yaml:"mig_layout"`
}

type deviceYAML struct {
	ID         string `yaml:"id"`
	Model      string `yaml:"model"`
	MemMiB     *int64 `yaml:"memory_mib"`
	Socket     int    `yaml:"socket"`
	NUMA       int    `yaml:"numa"`
	PCIeSwitch int    `yaml:"pcie_switch"`
	NVLink     *int   `yaml:"nvlink"` // nil: -1, no NVLink
	NIC        string `yaml:"nic"`
	// MIG and MIGLayout override the group's for this GPU ("" for MIG: not
	// in MIG mode).
	MIG       *string `yaml:"mig"`
	MIGLayout *string `yaml:"mig_layout"`
}

// ReadClusterYAML reads a corral cluster file. name is the file name used in
// messages.
func ReadClusterYAML(r io.Reader, name string) (*ClusterSpec, error) {
	return readClusterYAML(r, name, defaultLimits)
}

func readClusterYAML(r io.Reader, name string, lim limits) (*ClusterSpec, error) {
	var file clusterFileYAML
	doc, err := decodeYAML(r, name, &file)
	if err != nil {
		return nil, err
	}
	c := &ClusterSpec{Name: file.Name}
	if c.Name == "" {
		c.Name = name
	}
	if c.Topology, err = yamlLevels(doc, file.Levels); err != nil {
		return nil, err
	}
	if len(file.Groups) == 0 {
		return nil, doc.errAt("groups", []any{"groups"}, "no node groups: a cluster needs at least one node")
	}
	// Sizes first, so that a typo in a count cannot make us allocate.
	nodes, gpuCount := 0, 0
	for gi := range file.Groups {
		g := &file.Groups[gi]
		at := func(f ...any) []any { return append([]any{"groups", gi}, f...) }
		count := 1
		if g.Count != nil {
			count = *g.Count
		}
		if count <= 0 {
			return nil, doc.errAt("count", at("count"), "%d nodes: a group needs at least one", count)
		}
		if count > lim.nodes {
			return nil, doc.errAt("count", at("count"), "%d nodes is above the limit of %d", count, lim.nodes)
		}
		per, err := groupGPUCount(doc, g, at, lim)
		if err != nil {
			return nil, err
		}
		nodes += count
		gpuCount += count * per
		if nodes > lim.nodes || gpuCount > lim.gpus {
			return nil, doc.errAt("count", at("count"), "the cluster is above the limit of %d nodes and %d GPUs", lim.nodes, lim.gpus)
		}
	}
	names := map[string]int{} // node name -> group that made it
	for gi := range file.Groups {
		ns, err := expandGroup(doc, &file.Groups[gi], gi, c.Topology)
		if err != nil {
			return nil, err
		}
		for _, n := range ns {
			prev, dup := names[n.Name]
			switch {
			case dup && prev == gi:
				return nil, doc.errAt("name", []any{"groups", gi, "name"}, "%q makes node %q twice", file.Groups[gi].Name, n.Name)
			case dup:
				return nil, doc.errAt("name", []any{"groups", gi, "name"}, "node %q is also made by the group on line %d", n.Name, doc.line("groups", prev))
			}
			names[n.Name] = gi
		}
		c.Nodes = append(c.Nodes, ns...)
	}
	if err := checkNesting(doc, c, file.Groups); err != nil {
		return nil, err
	}
	return c, c.check(name)
}

// yamlLevels checks the topology levels: named, on distinct labels.
func yamlLevels(doc *yamlDoc, levels []levelYAML) (cluster.Topology, error) {
	var t cluster.Topology
	names, labels := map[string]bool{cluster.LevelCluster: true, cluster.LevelHost: true}, map[string]bool{}
	for i, l := range levels {
		switch {
		case l.Name == "":
			return t, doc.errAt("name", []any{"levels", i}, "level needs a name")
		case l.Label == "":
			return t, doc.errAt("label", []any{"levels", i}, "level %q needs the node label that holds it", l.Name)
		case names[l.Name]:
			return t, doc.errAt("name", []any{"levels", i, "name"}, "level %q is defined twice or shadows the implicit levels cluster and host", l.Name)
		case labels[l.Label]:
			return t, doc.errAt("label", []any{"levels", i, "label"}, "label %q holds two levels", l.Label)
		}
		names[l.Name], labels[l.Label] = true, true
		t.Levels = append(t.Levels, cluster.Level{Name: l.Name, Label: l.Label})
	}
	return t, nil
}

// groupGPUCount checks a group's gpus block and returns its GPUs per node.
func groupGPUCount(doc *yamlDoc, g *groupYAML, at func(...any) []any, lim limits) (int, error) {
	if g.CPUMilli < 0 {
		return 0, doc.errAt("cpu_milli", at("cpu_milli"), "negative value %d", g.CPUMilli)
	}
	if g.MemMiB < 0 {
		return 0, doc.errAt("memory_mib", at("memory_mib"), "negative value %d", g.MemMiB)
	}
	gp := g.GPUs
	if gp == nil {
		return 0, nil
	}
	n := gp.Count
	switch {
	case gp.Count < 0:
		return 0, doc.errAt("count", at("gpus", "count"), "negative GPU count %d", gp.Count)
	case gp.MemMiB < 0:
		return 0, doc.errAt("memory_mib", at("gpus", "memory_mib"), "negative value %d", gp.MemMiB)
	case len(gp.Devices) > 0:
		if gp.Layout != "" && gp.Layout != "explicit" {
			return 0, doc.errAt("layout", at("gpus", "layout"), "layout %q with a devices list: use layout explicit, or drop devices", gp.Layout)
		}
		if gp.Count != 0 && gp.Count != len(gp.Devices) {
			return 0, doc.errAt("count", at("gpus", "count"), "count %d but %d devices listed", gp.Count, len(gp.Devices))
		}
		n = len(gp.Devices)
	case gp.Layout == "explicit":
		return 0, doc.errAt("devices", at("gpus", "layout"), "layout explicit needs a devices list")
	case gp.Count > 0 && gp.Layout == "":
		return 0, doc.errAt("layout", at("gpus"), "GPUs need a layout (known: %s, explicit)", strings.Join(layoutNames(), ", "))
	case gp.Count > 0 && layouts[gp.Layout] == nil:
		return 0, doc.errAt("layout", at("gpus", "layout"), "unknown layout %q (known: %s, explicit)", gp.Layout, strings.Join(layoutNames(), ", "))
	case gp.Count > 0 && gp.Model == "":
		return 0, doc.errAt("model", at("gpus"), "GPUs need a model")
	}
	if n > lim.gpusPerNode {
		return 0, doc.errAt("count", at("gpus"), "%d GPUs per node is above the limit of %d", n, lim.gpusPerNode)
	}
	return n, nil
}

// groupDevices makes one node's devices for a checked group.
func groupDevices(doc *yamlDoc, gp *gpusYAML, at func(...any) []any) ([]cluster.Device, error) {
	if gp == nil || (gp.Count == 0 && len(gp.Devices) == 0) {
		return nil, nil
	}
	if len(gp.Devices) == 0 {
		ds := gpus(gp.Layout, gp.Model, gp.MemMiB, gp.Count)
		for k := range ds {
			if err := setMIG(doc, &ds[k], gp.MIG, gp.MIGLayout, at("gpus", "mig")); err != nil {
				return nil, err
			}
		}
		return ds, nil
	}
	ds := make([]cluster.Device, len(gp.Devices))
	for k, y := range gp.Devices {
		d := cluster.Device{
			ID: y.ID, Model: y.Model, MemMiB: gp.MemMiB, NVLink: -1,
			Socket: y.Socket, NUMA: y.NUMA, PCIeSwitch: y.PCIeSwitch, NIC: y.NIC,
		}
		if d.ID == "" {
			d.ID = fmt.Sprintf("gpu%d", k)
		}
		if d.Model == "" {
			d.Model = gp.Model
		}
		if y.MemMiB != nil {
			d.MemMiB = *y.MemMiB
		}
		if y.NVLink != nil {
			d.NVLink = *y.NVLink
		}
		dev := func(f string) []any { return at("gpus", "devices", k, f) }
		geom, layout := gp.MIG, gp.MIGLayout
		if y.MIG != nil {
			geom = *y.MIG
			if geom == "" {
				layout = "" // a GPU taken out of MIG mode keeps none of the group's layout
			}
		}
		if y.MIGLayout != nil {
			layout = *y.MIGLayout
		}
		if err := setMIG(doc, &d, geom, layout, dev("mig")); err != nil {
			return nil, err
		}
		switch {
		case d.Model == "":
			return nil, doc.errAt("model", at("gpus", "devices", k), "device %s has no model (set gpus.model or the device's model)", d.ID)
		case d.MemMiB < 0:
			return nil, doc.errAt("memory_mib", dev("memory_mib"), "negative value %d", d.MemMiB)
		case d.Socket < 0 || d.NUMA < 0 || d.PCIeSwitch < 0:
			return nil, doc.errAt("", at("gpus", "devices", k), "device %s: socket, numa and pcie_switch must not be negative", d.ID)
		case d.NVLink < -1:
			return nil, doc.errAt("nvlink", dev("nvlink"), "%d: want a group number, or -1 for none", d.NVLink)
		}
		for _, prev := range ds[:k] {
			if prev.ID == d.ID {
				return nil, doc.errAt("id", dev("id"), "device id %q is used twice", d.ID)
			}
		}
		ds[k] = d
	}
	return ds, nil
}

// expandGroup makes a checked group's nodes.
func expandGroup(doc *yamlDoc, g *groupYAML, gi int, topo cluster.Topology) ([]cluster.Node, error) {
	at := func(f ...any) []any { return append([]any{"groups", gi}, f...) }
	count := 1
	if g.Count != nil {
		count = *g.Count
	}
	if g.Name == "" {
		return nil, doc.errAt("name", at(), "a group needs a node name pattern")
	}
	namePat, err := parsePattern(g.Name)
	if err != nil {
		return nil, doc.errAt("name", at("name"), "%v", err)
	}
	if count > 1 && namePat.constant() {
		return nil, doc.errAt("name", at("name"), "%q names all %d nodes alike: add {i}, e.g. %q", g.Name, count, g.Name+"-{i}")
	}
	for _, l := range topo.Levels {
		if g.Labels[l.Label] == "" {
			return nil, doc.errAt("labels", at("labels"), "no label %q for topology level %q", l.Label, l.Name)
		}
	}
	keys := make([]string, 0, len(g.Labels))
	for k := range g.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys) // first error is the same on every run
	pats := make([]pattern, len(keys))
	for i, k := range keys {
		if k == "" {
			return nil, doc.errAt("labels", at("labels"), "empty label name")
		}
		if pats[i], err = parsePattern(g.Labels[k]); err != nil {
			return nil, doc.errAt("labels", at("labels", k), "%s: %v", k, err)
		}
	}
	devs, err := groupDevices(doc, g.GPUs, at)
	if err != nil {
		return nil, err
	}
	nodes := make([]cluster.Node, count)
	for i := range nodes {
		labels := make(map[string]string, len(keys))
		for k, key := range keys {
			labels[key] = pats[k].expand(i)
		}
		nodes[i] = cluster.Node{
			Name: namePat.expand(i), CPUMilli: g.CPUMilli, MemMiB: g.MemMiB,
			Devices: append([]cluster.Device(nil), devs...), Labels: labels,
			Unschedulable: g.Unschedulable,
		}
		if nodes[i].Name == "" {
			return nil, doc.errAt("name", at("name"), "pattern gives an empty name for node %d", i)
		}
	}
	return nodes, nil
}

// checkNesting refuses a domain that sits under two parents, such as rack
// "r0" in block "b0" and in block "b1": reports name domains, so a name must
// mean one place.
func checkNesting(doc *yamlDoc, c *ClusterSpec, groups []groupYAML) error {
	levels := c.Topology.Levels
	for lv := 1; lv < len(levels); lv++ {
		parent := map[string]string{}
		for i := range c.Nodes {
			n := &c.Nodes[i]
			v, p := n.Labels[levels[lv].Label], n.Labels[levels[lv-1].Label]
			if prev, ok := parent[v]; ok && prev != p {
				gi := groupOf(groups, i)
				return doc.errAt("labels", []any{"groups", gi, "labels", levels[lv].Label},
					"%s %q is in %s %q and in %s %q: make the value unique, e.g. by prefixing the %s",
					levels[lv].Name, v, levels[lv-1].Name, prev, levels[lv-1].Name, p, levels[lv-1].Name)
			}
			parent[v] = p
		}
	}
	return nil
}

// groupOf finds the group that made node i.
func groupOf(groups []groupYAML, i int) int {
	for gi := range groups {
		n := 1
		if groups[gi].Count != nil {
			n = *groups[gi].Count
		}
		if i < n {
			return gi
		}
		i -= n
	}
	return len(groups) - 1
}

// setMIG puts a GPU in MIG mode with a geometry and a layout, checked.
func setMIG(doc *yamlDoc, d *cluster.Device, geom, layout string, path []any) error {
	if geom == "" {
		if layout != "" {
			return doc.errAt("mig_layout", path, "a MIG layout on a GPU not in MIG mode: set mig to its geometry")
		}
		return nil
	}
	g, ok := mig.Lookup(geom)
	if !ok {
		var known []string
		for _, m := range mig.Models() {
			known = append(known, m.Name)
		}
		return doc.errAt("mig", path, "unknown MIG geometry %q (known: %s)", geom, strings.Join(known, ", "))
	}
	l, err := mig.ParseLayout(layout)
	if err == nil {
		err = g.Validate(l)
	}
	if err != nil {
		return doc.errAt("mig_layout", path, "%v", err)
	}
	d.MIG, d.MIGLayout = g.Name, l
	return nil
}
