package trace

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/cluster"
)

// clusterStats is what the preset tests compare: sizes, not every device.
type clusterStats struct {
	Nodes, GPUs int
	Levels      []string
	Domains     map[string]int // level -> distinct label values
	Models      map[string]int // model -> GPUs
}

func statsOf(c *ClusterSpec) clusterStats {
	s := clusterStats{Nodes: len(c.Nodes), GPUs: c.GPUs(), Domains: map[string]int{}, Models: map[string]int{}}
	for _, l := range c.Topology.Levels {
		s.Levels = append(s.Levels, l.Name)
		seen := map[string]bool{}
		for _, n := range c.Nodes {
			seen[n.Labels[l.Label]] = true
		}
		s.Domains[l.Name] = len(seen)
	}
	for _, n := range c.Nodes {
		for _, d := range n.Devices {
			s.Models[d.Model]++
		}
	}
	return s
}

func TestPresets(t *testing.T) {
	cases := map[string]clusterStats{
		// Published: 1,213 GPU nodes, 6,212 GPUs, G2 4,392 (data/README.md).
		"openb": {Nodes: 1213, GPUs: 6212, Domains: map[string]int{}, Models: map[string]int{
			"A10": 2, "G2": 4392, "G3": 312, "P100": 265, "T4": 842, "V100M16": 195, "V100M32": 204,
		}},
		"dgx-h100": {Nodes: 512, GPUs: 4096, Levels: []string{"block", "rack"},
			Domains: map[string]int{"block": 4, "rack": 32}, Models: map[string]int{"H100": 4096}},
		"dgx-h100:blocks=2,racks=3,nodes=4": {Nodes: 24, GPUs: 192, Levels: []string{"block", "rack"},
			Domains: map[string]int{"block": 2, "rack": 6}, Models: map[string]int{"H100": 192}},
		// Published: 847 hosts, 119 ToRs, 3 PSWs, 1 DSW (data/README.md).
		"lingjun": {Nodes: 847, GPUs: 6776, Levels: []string{"dsw", "psw", "asw"},
			Domains: map[string]int{"dsw": 1, "psw": 3, "asw": 119}, Models: map[string]int{"H800": 6776}},
	}
	for spec, want := range cases {
		t.Run(spec, func(t *testing.T) {
			c, err := LoadCluster(spec)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, statsOf(c)); diff != "" {
				t.Errorf("LoadCluster(%q) (-want +got):\n%s", spec, diff)
			}
		})
	}
}

func TestDGXNode(t *testing.T) {
	c, err := LoadCluster("dgx-h100:blocks=1,racks=1,nodes=1")
	if err != nil {
		t.Fatal(err)
	}
	n := c.Nodes[0]
	type coord struct {
		ID                            string
		Socket, NUMA, PCIeSwitch, NVL int
		NIC                           string
	}
	var got []coord
	for _, d := range n.Devices {
		if d.Model != "H100" || d.MemMiB != 81920 {
			t.Errorf("device %s: %s %d MiB, want H100 81920 MiB", d.ID, d.Model, d.MemMiB)
		}
		got = append(got, coord{d.ID, d.Socket, d.NUMA, d.PCIeSwitch, d.NVLink, d.NIC})
	}
	want := []coord{
		{"gpu0", 0, 0, 0, 0, "mlx5_0"}, {"gpu1", 0, 0, 0, 0, "mlx5_1"},
		{"gpu2", 0, 0, 1, 0, "mlx5_2"}, {"gpu3", 0, 0, 1, 0, "mlx5_3"},
		{"gpu4", 1, 1, 2, 0, "mlx5_4"}, {"gpu5", 1, 1, 2, 0, "mlx5_5"},
		{"gpu6", 1, 1, 3, 0, "mlx5_6"}, {"gpu7", 1, 1, 3, 0, "mlx5_7"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}
	if n.Name != "b0-r00-n00" || n.Labels[LabelRack] != "b0-r00" || n.CPUMilli != 224000 || n.MemMiB != 2<<20 {
		t.Errorf("node %s %v %dm %dMiB", n.Name, n.Labels, n.CPUMilli, n.MemMiB)
	}
}

func TestLoadClusterErrors(t *testing.T) {
	cases := map[string]string{
		"dgx-h100:blocks=0":      `cluster "dgx-h100:blocks=0": blocks="0" must be a positive integer`,
		"dgx-h100:pods=2":        `cluster "dgx-h100:pods=2": bad parameter "pods=2": want blocks=N, racks=N (per block) or nodes=N (per rack)`,
		"dgx-h100:blocks=999999": `cluster "dgx-h100:blocks=999999": 127999872 nodes is above the limit of 100000`,
		"openb:x":                `cluster "openb:x": openb takes no parameters`,
		"nosuch":                 `cluster "nosuch" is neither a file nor a preset (openb, dgx-h100, lingjun, mig)`,
	}
	for spec, want := range cases {
		t.Run(spec, func(t *testing.T) {
			_, err := LoadCluster(spec)
			if err == nil || err.Error() != want {
				t.Errorf("LoadCluster(%q) = %v, want %s", spec, err, want)
			}
		})
	}
}

func TestClusterFileExample(t *testing.T) {
	c, err := LoadCluster("../../examples/sim/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := clusterStats{Nodes: 19, GPUs: 16*8 + 2*4 + 4, Levels: []string{"block", "rack"},
		Domains: map[string]int{"block": 3, "rack": 5}, Models: map[string]int{"H100": 128, "L4": 8, "A100": 4}}
	if diff := cmp.Diff(want, statsOf(c)); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	byName := map[string]cluster.Node{}
	for _, n := range c.Nodes {
		byName[n.Name] = n
	}
	if got := byName["h100-13"].Labels; got[LabelBlock] != "b1" || got[LabelRack] != "b1-r1" {
		t.Errorf("h100-13 labels %v, want block b1, rack b1-r1", got)
	}
	l4 := byName["l4-1"]
	if d := l4.Devices[3]; d.NUMA != 1 || d.PCIeSwitch != 3 || d.NVLink != -1 || d.MemMiB != 24576 {
		t.Errorf("l4-1 gpu3 %+v: want NUMA 1, own switch 3, no NVLink, 24576 MiB", d)
	}
	if d := byName["a100-custom"].Devices[2]; d.ID != "gpu2" || d.NVLink != 1 || d.NIC != "mlx5_1" {
		t.Errorf("a100-custom gpu2 %+v", d)
	}
}

// clusterYAML is a valid one-group cluster file; edits replace whole lines.
const clusterYAML = `levels:
  - name: rack
    label: rack
groups:
  - name: "n{i}"
    count: 4
    cpu_milli: 8000
    memory_mib: 65536
    labels:
      rack: "r{i/2}"
    gpus:
      model: T4
      count: 2
      layout: pcie
`

// editYAML replaces line n (1-based) of doc with repl, which may span lines.
func editYAML(doc string, n int, repl string) string {
	lines := strings.Split(doc, "\n")
	lines[n-1] = repl
	return strings.Join(lines, "\n")
}

func TestReadClusterYAMLErrors(t *testing.T) {
	cases := map[string]struct {
		doc  string
		want string
	}{
		"misspelt field":        {editYAML(clusterYAML, 7, "    cpu_mili: 8000"), `c.yaml:7: unknown field "cpu_mili"`},
		"negative CPU":          {editYAML(clusterYAML, 7, "    cpu_milli: -1"), `c.yaml:7: cpu_milli: negative value -1`},
		"negative memory":       {editYAML(clusterYAML, 8, "    memory_mib: -5"), `c.yaml:8: memory_mib: negative value -5`},
		"negative GPUs":         {editYAML(clusterYAML, 13, "      count: -2"), `c.yaml:13: count: negative GPU count -2`},
		"zero nodes":            {editYAML(clusterYAML, 6, "    count: 0"), `c.yaml:6: count: 0 nodes: a group needs at least one`},
		"unknown layout":        {editYAML(clusterYAML, 14, "      layout: nvl72"), `c.yaml:14: layout: unknown layout "nvl72" (known: dgx-h100, openb, pcie, explicit)`},
		"no layout":             {editYAML(clusterYAML, 14, ""), `c.yaml:11: layout: GPUs need a layout (known: dgx-h100, openb, pcie, explicit)`},
		"no model":              {editYAML(clusterYAML, 12, ""), `c.yaml:11: model: GPUs need a model`},
		"too many GPUs":         {editYAML(clusterYAML, 13, "      count: 65"), `c.yaml:11: count: 65 GPUs per node is above the limit of 64`},
		"duplicate names":       {editYAML(clusterYAML, 5, `  - name: "n{i/2}"`), `c.yaml:5: name: "n{i/2}" makes node "n0" twice`},
		"name without {i}":      {editYAML(clusterYAML, 5, "  - name: gpu"), `c.yaml:5: name: "gpu" names all 4 nodes alike: add {i}, e.g. "gpu-{i}"`},
		"bad pattern":           {editYAML(clusterYAML, 10, `      rack: "r{i/0}"`), `c.yaml:10: labels: rack: {i/0}: division by zero`},
		"missing level label":   {editYAML(clusterYAML, 10, `      zone: "z"`), `c.yaml:9: labels: no label "rack" for topology level "rack"`},
		"level shadows host":    {editYAML(clusterYAML, 2, "  - name: host"), `c.yaml:2: name: level "host" is defined twice or shadows the implicit levels cluster and host`},
		"not a number":          {editYAML(clusterYAML, 7, "    cpu_milli: lots"), `c.yaml:7: "lots" is not an integer (or is out of range)`},
		"syntax error":          {editYAML(clusterYAML, 7, "    cpu_milli: [8000"), `c.yaml:6: did not find expected ',' or ']'`},
		"empty":                 {"", `c.yaml: empty file`},
		"no groups":             {"levels: []\n", `c.yaml:1: groups: no node groups: a cluster needs at least one node`},
		"explicit without list": {editYAML(clusterYAML, 14, "      layout: explicit"), `c.yaml:14: devices: layout explicit needs a devices list`},
		"two documents":         {clusterYAML + "---\nname: x\n", `c.yaml:15: a second YAML document; corral reads one per file`},
		"rack under two blocks": {`levels: [{name: block, label: b}, {name: rack, label: r}]
groups:
  - name: "n{i}"
    count: 2
    labels: {b: "b{i}", r: "r0"}
`, `c.yaml:5: labels: rack "r0" is in block "b0" and in block "b1": make the value unique, e.g. by prefixing the block`},
		"duplicate device id": {`groups:
  - name: n
    gpus:
      model: A100
      layout: explicit
      devices:
        - {id: a}
        - {id: a}
`, `c.yaml:8: id: device id "a" is used twice`},
		"unknown MIG geometry": {`groups:
  - name: n
    gpus: {model: A100, layout: pcie, count: 2, mig: A100-120GB}
`, `c.yaml:3: mig: unknown MIG geometry "A100-120GB" (known: A100-40GB, A100-80GB, H100-80GB, H200-141GB)`},
		"an invalid MIG layout": {`groups:
  - name: n
    gpus: {model: A100, layout: pcie, count: 2, mig: A100-80GB, mig_layout: "4g.40gb@4"}
`, `c.yaml:3: mig_layout: 4g.40gb@4: invalid placement start: 4g.40gb starts at [0]`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := ReadClusterYAML(strings.NewReader(tc.doc), "c.yaml")
			if err == nil {
				t.Fatalf("accepted: %d nodes", len(c.Nodes))
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
}

func TestClusterFileMIG(t *testing.T) {
	c, err := ReadClusterYAML(strings.NewReader(`groups:
  - name: "n{i}"
    count: 2
    gpus:
      model: H100
      layout: explicit
      mig: H100-80GB
      mig_layout: "3g.40gb@0,3g.40gb@4"
      devices:
        - {id: gpu0}
        - {id: gpu1, mig_layout: ""}
        - {id: gpu2, mig: ""}
`), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range c.Nodes[1].Devices {
		got = append(got, d.ID+":"+d.MIG+":"+d.MIGLayout.String())
	}
	want := []string{"gpu0:H100-80GB:[3g.40gb@0 3g.40gb@4]", "gpu1:H100-80GB:[]", "gpu2::[]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}
}

func TestReadOpenbNodesErrors(t *testing.T) {
	const head = "sn,cpu_milli,memory_mib,gpu,model\n"
	cases := map[string]struct{ doc, want string }{
		"missing column":  {"sn,cpu_milli,memory_mib,gpu\nn0,1,1,1\n", `n.csv:1: missing column "model"`},
		"negative GPUs":   {head + "n0,1000,1024,-1,T4\n", `n.csv:2: gpu: negative value -1`},
		"malformed":       {head + "n0,1k,1024,1,T4\n", `n.csv:2: cpu_milli: malformed integer "1k"`},
		"duplicate node":  {head + "n0,1,1,1,T4\nn0,1,1,1,T4\n", `n.csv:3: sn: node "n0" already appears on line 2`},
		"no model":        {head + "n0,1,1,1,\n", `n.csv:2: model: empty model for 1 GPUs`},
		"short row":       {head + "n0,1,1\n", `n.csv:2: 3 fields where the header has 5`},
		"unknown column":  {"sn,cpu_milli,memory_mib,gpu,model,rack\n", `n.csv:1: unknown column "rack" (known: sn,cpu_milli,memory_mib,gpu,model)`},
		"repeated column": {"sn,sn\n", `n.csv:1: column "sn" appears twice`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := readOpenbNodes(strings.NewReader(tc.doc), "n.csv")
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
}

func TestPattern(t *testing.T) {
	cases := map[string]struct {
		pat  string
		i    int
		want string
	}{
		"index":         {"n{i}", 7, "n7"},
		"padded":        {"gpu-{i:03}", 7, "gpu-007"},
		"racks of 16":   {"r{i/16}", 40, "r2"},
		"rack in block": {"b{i/32}-r{i/4%8:02}", 45, "b1-r03"},
		"offset":        {"n{i+1}", 0, "n1"},
		"spaces":        {"n{ i * 2 }", 3, "n6"},
		"literal":       {"login", 3, "login"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := parsePattern(tc.pat)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.expand(tc.i); got != tc.want {
				t.Errorf("%q.expand(%d) = %q, want %q", tc.pat, tc.i, got, tc.want)
			}
		})
	}
	for _, bad := range []string{"n{i", "n}", "n{j}", "n{i/}", "n{i^2}", "n{i:x}", "n{i%0}", "n{i:99}"} {
		if _, err := parsePattern(bad); err == nil {
			t.Errorf("parsePattern(%q) accepted", bad)
		}
	}
}

// TestLoadClusterFile covers the file path of LoadCluster: extension checks.
func TestLoadClusterFile(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/c.json"
	if err := os.WriteFile(path, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadCluster(path)
	if want := path + `: unknown cluster file type ".json": want .yaml or .yml`; err == nil || err.Error() != want {
		t.Errorf("LoadCluster(%q) = %v, want %s", path, err, want)
	}
}
