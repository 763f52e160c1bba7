package trace

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/corral-dev/corral/internal/cluster"
)

// ClusterSpec is a cluster as read: its topology levels and nodes. It is known
// to build: LoadCluster and the readers check it with cluster.New.
type ClusterSpec struct {
	Name     string
	Topology cluster.Topology
	Nodes    []cluster.Node
}

// GPUs is the number of GPU devices in the cluster.
func (c *ClusterSpec) GPUs() int {
	n := 0
	for i := range c.Nodes {
		n += len(c.Nodes[i].Devices)
	}
	return n
}

// Presets lists the built-in cluster names, for --help.
func Presets() []string { return []string{"openb", "dgx-h100", "lingjun", "mig"} }

// LoadCluster reads a cluster by name: a preset ("openb", "lingjun",
// "dgx-h100" or "dgx-h100:blocks=4,racks=8,nodes=16") or the path of a YAML
// cluster file.
func LoadCluster(spec string) (*ClusterSpec, error) {
	name, params, _ := strings.Cut(spec, ":")
	switch name {
	case "openb":
		if params != "" {
			return nil, fmt.Errorf("cluster %q: openb takes no parameters", spec)
		}
		return openbCluster()
	case "lingjun":
		if params != "" {
			return nil, fmt.Errorf("cluster %q: lingjun takes no parameters", spec)
		}
		return lingjunCluster()
	case "dgx-h100":
		return dgxCluster(spec, params)
	case "mig":
		return migCluster(spec, params)
	}
	f, err := os.Open(spec)
	if err != nil {
		if os.IsNotExist(err) && !strings.ContainsAny(spec, `/\.`) {
			return nil, fmt.Errorf("cluster %q is neither a file nor a preset (%s)", spec, strings.Join(Presets(), ", "))
		}
		return nil, err
	}
	defer f.Close()
	switch ext := strings.ToLower(filepath.Ext(spec)); ext {
	case ".yaml", ".yml":
		return ReadClusterYAML(f, spec)
	default:
		return nil, fmt.Errorf("%s: unknown cluster file type %q: want .yaml or .yml", spec, ext)
	}
}

// check builds the spec with cluster.New so that callers get a cluster the
// engine accepts, and says which input the failure came from.
func (c *ClusterSpec) check(file string) error {
	if _, err := cluster.New(c.Topology, c.Nodes); err != nil {
		return errorf(file, 0, "", "%v", err)
	}
	return nil
}

// Intra-node layouts: the coordinates of n GPUs inside one node. They decide
// which device sets placement treats as close (see placement.deviceKey).
var layouts = map[string]func(n int) []cluster.Device{
	// dgx-h100: a DGX/HGX H100 board. All GPUs on one NVSwitch (NVLink group
	// 0); the first half on socket/NUMA 0, the second on socket/NUMA 1; PCIe
	// switches hold two GPUs each, and every GPU has its own NIC
	// (mlx5_0..mlx5_7 on a DGX H100, two per PCIe switch).
	"dgx-h100": func(n int) []cluster.Device {
		ds := make([]cluster.Device, n)
		for i := range ds {
			half := i * 2 / n
			ds[i] = cluster.Device{Socket: half, NUMA: half, PCIeSwitch: i / 2, NVLink: 0, NIC: fmt.Sprintf("mlx5_%d", i)}
		}
		return ds
	},
	// pcie: PCIe cards with no NVLink, each behind its own switch, the first
	// half on socket/NUMA 0 and the second on socket/NUMA 1; no NICs named.
	"pcie": func(n int) []cluster.Device {
		ds := make([]cluster.Device, n)
		for i := range ds {
			half := i * 2 / n
			ds[i] = cluster.Device{Socket: half, NUMA: half, PCIeSwitch: i, NVLink: -1}
		}
		return ds
	},
	// openb: what the openb preset assumes, since the trace publishes no
	// intra-node layout: one socket, no NVLink, pairs of GPUs per PCIe switch.
	"openb": func(n int) []cluster.Device {
		ds := make([]cluster.Device, n)
		for i := range ds {
			ds[i] = cluster.Device{PCIeSwitch: i / 2, NVLink: -1}
		}
		return ds
	},
}

// layoutNames lists the layout presets, sorted, for messages.
func layoutNames() []string {
	var out []string
	for k := range layouts {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// gpus makes n devices of one model with a layout, named gpu0..gpu<n-1>.
func gpus(layout, model string, memMiB int64, n int) []cluster.Device {
	ds := layouts[layout](n)
	for i := range ds {
		ds[i].ID = fmt.Sprintf("gpu%d", i)
		ds[i].Model = model
		ds[i].MemMiB = memMiB
	}
	return ds
}
