package trace

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/data"
	"github.com/corral-dev/corral/internal/cluster"
)

// Topology labels of the presets.
const (
	LabelBlock = "corral.dev/block"
	LabelRack  = "corral.dev/rack"
	LabelDSW   = "corral.dev/dsw"
	LabelPSW   = "corral.dev/psw"
	LabelASW   = "corral.dev/asw"
)

// The DGX H100 node (NVIDIA DGX H100 datasheet): 8 H100 SXM 80GB on NVSwitch,
// 2 x 56-core Xeon 8480C = 112 cores / 224 threads, 2 TiB memory, 8 ConnectX-7
// for the compute fabric. CPU is counted in threads, as Kubernetes does.
const (
	dgxGPUs   = 8
	dgxCPU    = 224_000
	dgxMemMiB = 2 << 20 // 2 TiB
	h100MiB   = 80 << 10
)

func dgxNode(name, model string, labels map[string]string) cluster.Node {
	return cluster.Node{
		Name: name, CPUMilli: dgxCPU, MemMiB: dgxMemMiB,
		Devices: gpus("dgx-h100", model, h100MiB, dgxGPUs),
		Labels:  labels,
	}
}

// dgxCluster builds blocks x racks x nodes DGX H100 nodes. Rack names carry
// their block ("b0-r03") so that every rack domain is unique cluster-wide.
func dgxCluster(spec, params string) (*ClusterSpec, error) {
	dims := map[string]int{"blocks": 4, "racks": 8, "nodes": 16}
	if params != "" {
		for _, kv := range strings.Split(params, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if _, known := dims[k]; !ok || !known {
				return nil, fmt.Errorf("cluster %q: bad parameter %q: want blocks=N, racks=N (per block) or nodes=N (per rack)", spec, kv)
			}
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("cluster %q: %s=%q must be a positive integer", spec, k, v)
			}
			dims[k] = n
		}
	}
	b, r, n := dims["blocks"], dims["racks"], dims["nodes"]
	if total := int64(b) * int64(r) * int64(n); total > int64(defaultLimits.nodes) {
		return nil, fmt.Errorf("cluster %q: %d nodes is above the limit of %d", spec, total, defaultLimits.nodes)
	}
	c := &ClusterSpec{
		Name:     spec,
		Topology: cluster.Topology{Levels: []cluster.Level{{Name: "block", Label: LabelBlock}, {Name: "rack", Label: LabelRack}}},
		Nodes:    make([]cluster.Node, 0, b*r*n),
	}
	for bi := 0; bi < b; bi++ {
		block := fmt.Sprintf("b%d", bi)
		for ri := 0; ri < r; ri++ {
			rack := fmt.Sprintf("%s-r%02d", block, ri)
			for ni := 0; ni < n; ni++ {
				name := fmt.Sprintf("%s-n%02d", rack, ni)
				c.Nodes = append(c.Nodes, dgxNode(name, "H100", map[string]string{LabelBlock: block, LabelRack: rack}))
			}
		}
	}
	return c, c.check(spec)
}

// openbGPUMiB is the memory of the openb models that name a public part. G1-G3
// are undisclosed internal codes: their memory is unknown and left at 0.
var openbGPUMiB = map[string]int64{
	"P100": 16 << 10, "T4": 16 << 10, "V100M16": 16 << 10, "V100M32": 32 << 10, "A10": 24 << 10,
}

func openbCluster() (*ClusterSpec, error) {
	return embeddedCluster("openb", "openb/openb_node_list_gpu_node.csv", readOpenbNodes)
}

// embeddedCluster reads a preset from a file of the bundled data.
func embeddedCluster(name, file string, read func(io.Reader, string) (*ClusterSpec, error)) (*ClusterSpec, error) {
	f, err := data.FS.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := read(f, "data/"+file)
	if err != nil {
		return nil, err
	}
	c.Name = name
	return c, nil
}

// readOpenbNodes reads an openb node list (sn,cpu_milli,memory_mib,gpu,model)
// into a flat cluster: openb publishes no inter-node topology.
func readOpenbNodes(r io.Reader, name string) (*ClusterSpec, error) {
	f, err := openCSV(r, name, []string{"sn", "cpu_milli", "memory_mib", "gpu", "model"}, nil)
	if err != nil {
		return nil, err
	}
	c := &ClusterSpec{Name: name}
	seen := map[string]int{}
	total := 0
	for {
		ok, err := f.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		n := cluster.Node{Name: f.str("sn")}
		if n.Name == "" {
			return nil, f.errAt("sn", "empty node name")
		}
		if prev, dup := seen[n.Name]; dup {
			return nil, f.errAt("sn", "node %q already appears on line %d", n.Name, prev)
		}
		seen[n.Name] = f.line()
		if n.CPUMilli, err = f.int64("cpu_milli", 0); err != nil {
			return nil, err
		}
		if n.MemMiB, err = f.int64("memory_mib", 0); err != nil {
			return nil, err
		}
		count, err := f.intMax("gpu", 0, int64(defaultLimits.gpusPerNode))
		if err != nil {
			return nil, err
		}
		model := f.str("model")
		if count > 0 && model == "" {
			return nil, f.errAt("model", "empty model for %d GPUs", count)
		}
		if total += count; total > defaultLimits.gpus || len(c.Nodes) == defaultLimits.nodes {
			return nil, f.errAt("sn", "cluster is above the limit of %d nodes or %d GPUs", defaultLimits.nodes, defaultLimits.gpus)
		}
		n.Devices = gpus("openb", model, openbGPUMiB[model], count)
		c.Nodes = append(c.Nodes, n)
	}
	return c, c.check(name)
}

// lingjunCluster is the Clos network of alibaba-lingjun-dataset-2023: 847
// hosts under 119 ToR (ASW), 3 aggregation (PSW) and 1 core (DSW) switches.
// The dataset publishes the network only: every host is assumed to be an
// 8-GPU H800 (the H100 variant sold in China) board laid out and sized like a
// DGX H100.
func lingjunCluster() (*ClusterSpec, error) {
	return embeddedCluster("lingjun", "lingjun/topo.csv", readLingjun)
}

func readLingjun(r io.Reader, name string) (*ClusterSpec, error) {
	f, err := openCSV(r, name, []string{"ip", "DSW", "PSW", "ASW"}, nil)
	if err != nil {
		return nil, err
	}
	type host struct {
		ip, dsw, psw, asw string
		line              int
	}
	var hosts []host
	seen := map[string]int{}
	for {
		ok, err := f.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		h := host{ip: f.str("ip"), dsw: f.str("DSW"), psw: f.str("PSW"), asw: f.str("ASW"), line: f.line()}
		for _, col := range []string{"ip", "DSW", "PSW", "ASW"} {
			if f.str(col) == "" {
				return nil, f.errAt(col, "empty value")
			}
		}
		if prev, dup := seen[h.ip]; dup {
			return nil, f.errAt("ip", "host %q already appears on line %d", h.ip, prev)
		}
		if len(hosts) == defaultLimits.nodes {
			return nil, f.errAt("ip", "more than %d hosts", defaultLimits.nodes)
		}
		seen[h.ip] = h.line
		hosts = append(hosts, h)
	}
	ips := make([]string, len(hosts))
	for i, h := range hosts {
		ips[i] = h.ip
	}
	width := uniquePrefix(ips, 8)
	c := &ClusterSpec{
		Name: name,
		Topology: cluster.Topology{Levels: []cluster.Level{
			{Name: "dsw", Label: LabelDSW}, {Name: "psw", Label: LabelPSW}, {Name: "asw", Label: LabelASW},
		}},
	}
	for _, h := range hosts {
		// Switch names repeat under different parents (S14 under P10 and
		// under P12): prefix each with its parents so domains are unique.
		psw := h.dsw + "-" + h.psw
		c.Nodes = append(c.Nodes, dgxNode("host-"+h.ip[:min(width, len(h.ip))], "H800", map[string]string{
			LabelDSW: h.dsw, LabelPSW: psw, LabelASW: psw + "-" + h.asw,
		}))
	}
	return c, c.check(name)
}

// uniquePrefix is the shortest prefix length, at least from, that tells all
// the (distinct) strings apart: hashed IPs are long, host names need not be.
func uniquePrefix(ss []string, from int) int {
	for w := from; ; w++ {
		seen := make(map[string]bool, len(ss))
		longest := 0
		clash := false
		for _, s := range ss {
			p := s[:min(w, len(s))]
			longest = max(longest, len(s))
			if seen[p] {
				clash = true
				break
			}
			seen[p] = true
		}
		if !clash || w >= longest {
			return w
		}
	}
}
