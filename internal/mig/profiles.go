// Package mig models NVIDIA Multi-Instance GPU geometry: which GPU-instance
// profiles a GPU product offers, where on the GPU each may start, and which
// sets of instances fit on one GPU together.
//
// The package is engine side: no Kubernetes imports, no I/O, and every
// answer is a pure function of its arguments (maps are walked in a fixed
// order, ties are broken by start and name).
//
// # The geometry
//
// Every GPU modelled here has 7 compute slices and 8 memory slices. A GPU
// instance occupies a contiguous run of memory slices; NVML calls it a
// placement, {start, size}, where start is the index of the first memory
// slice and size the number of memory slices (NVML API Reference,
// nvmlGpuInstancePlacement_t). NVML creates an instance only at one of the
// placements its profile lists, and refuses one whose memory slices overlap
// an existing instance (NVML API Reference,
// nvmlDeviceGetGpuInstancePossiblePlacements_v2). Overlap of memory slices is
// therefore the only conflict this package checks: on these tables every
// profile takes no more compute slices than memory slices, and memory slice 7
// is reachable only by 3g at 4 and 7g at 0, so no set of non-overlapping
// placements can need more than 7 compute slices.
//
// # Sources
//
// Profile names, compute and memory fractions and the number of instances per
// GPU come from NVIDIA's Multi-Instance GPU User Guide, section "Supported
// MIG Profiles" (tables "A100 MIG Profiles", "H100 MIG Profiles", "H200 MIG
// Profiles"). NVIDIA publishes the placements as diagrams in that section;
// their text form is the output of `nvidia-smi mig -lgipp`, which the guide
// prints for an A100-SXM4-40GB in "Getting Started with MIG" (placements).
// Per-product confirmations and gaps are noted on each table below and in
// docs/mig.md.
package mig

import (
	"slices"
	"strings"
)

const (
	// MemorySlices is the number of memory slices of every modelled GPU;
	// placement starts index them from 0.
	MemorySlices = 8
	// ComputeSlices is the number of compute slices of every modelled GPU.
	ComputeSlices = 7
)

// Profile is one GPU-instance profile of a GPU product.
type Profile struct {
	Name string // as nvidia-smi and the device plugin spell it, e.g. "3g.20gb"
	// ID is the GPU instance profile ID nvidia-smi mig -lgip prints and
	// -cgi accepts (19, 20, 15, 14, 9, 5, 0 on every model here).
	ID       int
	Compute  int // compute slices (the "3g"), of ComputeSlices
	Memory   int // memory slices, of MemorySlices: the placement size
	MemoryGB int // memory as the profile name states it (nominal GB)
	// ReportedGiB is the memory nvidia-smi mig -lgip printed in the sample
	// cited for the model. It varies a little with the driver version
	// (the A100-40GB 7g has been reported as 39.25, 39.38 and 39.50).
	ReportedGiB float64
	MaxCount    int   // most instances of this profile on one GPU
	Starts      []int // valid placement starts (memory-slice index), ascending
}

// Model is the MIG geometry of one GPU product (or of several products that
// share it, such as the SXM and PCIe H100 80GB).
type Model struct {
	Name     string    // corral's name for the geometry, e.g. "A100-40GB"
	Products []string  // product names it answers to, normalised (see Lookup)
	Profiles []Profile // in NVIDIA's table order, smallest first
}

// Profile returns the profile called name.
func (m Model) Profile(name string) (Profile, bool) {
	if i := m.index(name); i >= 0 {
		return m.Profiles[i], true
	}
	return Profile{}, false
}

func (m Model) index(name string) int {
	for i := range m.Profiles {
		if m.Profiles[i].Name == name {
			return i
		}
	}
	return -1
}

// The placements below are the same on all four models: the
// nvidia-smi mig -lgipp listing the MIG User Guide prints for an
// A100-SXM4-40GB ("Getting Started with MIG", placements) is
//
//	ID 19 {0,1,2,3,4,5,6}:1   ID 20 {0,1,2,3,4,5,6}:1   ID 15 {0,2,4,6}:2
//	ID 14 {0,2,4}:2           ID 9 {0,4}:4              ID 5 {0}:4   ID 0 {0}:8
//
// and identical listings have been published for H100 80GB and H100 NVL
// boards. Profile IDs match across A100, H100 and H200 (nvidia-smi mig -lgip
// samples cited per model), and so do the instance counts of NVIDIA's tables.
var (
	starts1g     = []int{0, 1, 2, 3, 4, 5, 6}
	starts1gWide = []int{0, 2, 4, 6}
	starts2g     = []int{0, 2, 4}
	starts3g     = []int{0, 4}
	starts4g     = []int{0}
	starts7g     = []int{0}
)

// table builds the seven profiles every modelled product has, from its names
// and the memory nvidia-smi reported for each.
func table(names [7]string, gb [7]int, gib [7]float64) []Profile {
	shape := [7]struct {
		id, compute, memory, max int
		starts                   []int
	}{
		{19, 1, 1, 7, starts1g},     // 1g, one memory slice
		{20, 1, 1, 1, starts1g},     // 1g+me: "a single 1g profile can include media extensions"
		{15, 1, 2, 4, starts1gWide}, // 1g with two memory slices
		{14, 2, 2, 3, starts2g},
		{9, 3, 4, 2, starts3g}, // 3g takes half the memory: 4 of 8 slices
		{5, 4, 4, 1, starts4g},
		{0, 7, 8, 1, starts7g},
	}
	ps := make([]Profile, len(names))
	for i, s := range shape {
		ps[i] = Profile{
			Name: names[i], ID: s.id, Compute: s.compute, Memory: s.memory,
			MemoryGB: gb[i], ReportedGiB: gib[i], MaxCount: s.max,
			Starts: s.starts,
		}
	}
	return ps
}

var models = []Model{
	{
		// MIG User Guide, "Supported MIG Profiles", A100 MIG Profiles table
		// (A100-SXM4-40GB). That table gives 1g.10gb a memory fraction of
		// 1/8; its placements ({0,2,4,6}:2 in -lgipp), its limit of 4 and
		// its 9.75 GiB (twice 1g.5gb) all say two slices, which is what is
		// recorded. 1g.10gb needs an R525 driver, 1g.5gb+me an R470 one.
		// A100-PCIE-40GB shares the geometry: NVIDIA's mig-parted
		// config-default.yaml files both device IDs (0x20B0, 0x20F1) under
		// "A100-40GB". Memory: nvidia-smi mig -lgip sample in "NVIDIA GPU
		// Sharing" (ssup2.github.io).
		Name:     "A100-40GB",
		Products: []string{"A100-SXM4-40GB", "A100-PCIE-40GB", "A100-40GB"},
		Profiles: table(
			[7]string{"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"},
			[7]int{5, 5, 10, 10, 20, 20, 40},
			[7]float64{4.75, 4.75, 9.75, 9.75, 19.62, 19.62, 39.38},
		),
	},
	{
		// MIG User Guide, "Supported MIG Profiles", A100 MIG Profiles: "for
		// A100-SXM4-80GB, the profile names will change according to the
		// memory proportion" (1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb,
		// 3g.40gb, 4g.40gb, 7g.80gb). mig-parted groups A100 80GB PCIe
		// (0x20B5) with SXM4 (0x20B2). No nvidia-smi mig -lgipp listing of
		// an A100 80GB was found: its placements are taken from the A100
		// diagram and the 40GB listing (same profile IDs and counts).
		// Memory: nvidia-smi mig -lgip samples for "A100 80GB" (two
		// independent ones agree).
		Name:     "A100-80GB",
		Products: []string{"A100-SXM4-80GB", "A100-80GB-PCIE", "A100-80GB"},
		Profiles: table(
			[7]string{"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
			[7]int{10, 10, 20, 20, 40, 40, 80},
			[7]float64{9.50, 9.50, 19.50, 19.50, 39.25, 39.25, 79.00},
		),
	},
	{
		// MIG User Guide, "Supported MIG Profiles", H100 MIG Profiles: the
		// table is for "the H100 80GB product (PCIe and SXM5)". Placements
		// confirmed by nvidia-smi mig -lgipp listings published for H100
		// 80GB boards. H100 94GB (NVL) and 96GB (GH200) have other profile
		// names and are not modelled. Memory: nvidia-smi mig -lgip samples
		// on an H100 80GB HBM3 (132 SMs).
		Name:     "H100-80GB",
		Products: []string{"H100-80GB-HBM3", "H100-PCIE", "H100-SXM5-80GB", "H100-80GB", "H100"},
		Profiles: table(
			[7]string{"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
			[7]int{10, 10, 20, 20, 40, 40, 80},
			[7]float64{9.75, 9.75, 19.62, 19.62, 39.50, 39.50, 79.25},
		),
	},
	{
		// MIG User Guide, "Supported MIG Profiles", H200 MIG Profiles (the
		// H200 141GB product): same fractions and counts as H100. mig-parted
		// gives H200 141GB (0x2335) and H200 NVL (0x233B) the same profiles.
		// Memory and profile IDs: nvidia-smi mig -lgip output in
		// NVIDIA/mig-parted issue #120 ("Add support for the NVIDIA H200
		// GPU"). No nvidia-smi mig -lgipp listing of an H200 was found: its
		// placements are taken from the H200 diagram and the H100 listing.
		Name:     "H200-141GB",
		Products: []string{"H200", "H200-NVL", "H200-141GB"},
		Profiles: table(
			[7]string{"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"},
			[7]int{18, 18, 35, 35, 71, 71, 141},
			[7]float64{16.00, 16.00, 32.25, 32.25, 69.50, 69.50, 139.75},
		),
	},
}

// Models returns every modelled GPU geometry, in a fixed order.
func Models() []Model {
	out := make([]Model, len(models))
	for i, m := range models {
		out[i] = m.clone()
	}
	return out
}

// Lookup finds the geometry of a GPU product. It accepts the names NVML and
// nvidia-smi report ("NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3",
// "NVIDIA H200"), GPU Feature Discovery's nvidia.com/gpu.product label
// values (spaces turned into hyphens, a "-MIG-<profile>" suffix under the
// single MIG strategy, a "-SHARED" suffix under time-slicing), older
// drivers' names without "NVIDIA", and short names ("A100-40GB",
// "A100-80GB", "H100", "H200"). Case is ignored. A bare "A100" is
// ambiguous (40 or 80 GB) and is not accepted.
func Lookup(product string) (Model, bool) {
	key := normalize(product)
	for _, m := range models {
		if slices.Contains(m.Products, key) || key == normalize(m.Name) {
			return m.clone(), true
		}
	}
	return Model{}, false
}

// normalize turns a product name into the form Model.Products holds.
func normalize(s string) string {
	s = strings.ToUpper(strings.TrimSpace(s))
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return r == ' ' || r == '-' || r == '_'
	}), "-")
	s = strings.TrimPrefix(s, "NVIDIA-")
	if i := strings.Index(s, "-MIG-"); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSuffix(s, "-SHARED")
}

// clone copies m so that callers cannot edit the package's tables.
func (m Model) clone() Model {
	m.Products = slices.Clone(m.Products)
	m.Profiles = slices.Clone(m.Profiles)
	for i := range m.Profiles {
		m.Profiles[i].Starts = slices.Clone(m.Profiles[i].Starts)
	}
	return m
}
