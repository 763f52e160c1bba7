package sim

import (
	"sort"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/metrics"
	"github.com/corral-dev/corral/internal/placement"
)

// CommModel is the stated communication-slowdown model the replay applies to
// every policy alike: a job's runtime is multiplied by
//
//	1 + Σ_levels PerLevel[L] × (domains spanned at L − fewest possible at L)
//	  + PCIe × (PCIe switches its multi-GPU pods span beyond the fewest possible)
//
// Levels count from the host upwards (host, then the narrowest inter-node
// level, ...); the last penalty repeats for wider levels. Crossing wider
// levels costs more because each hop crosses more oversubscribed links.
type CommModel struct {
	PerLevel []float64
	PCIe     float64
}

// DefaultComm: 5% per extra node, 10% per extra rack-level domain, 20% per
// extra domain above that, 10% per extra PCIe switch inside a pod.
var DefaultComm = CommModel{PerLevel: []float64{0.05, 0.10, 0.20}, PCIe: 0.10}

func (c *CommModel) penalty(levelFromHost int) float64 {
	if len(c.PerLevel) == 0 {
		return 0
	}
	if levelFromHost >= len(c.PerLevel) {
		return c.PerLevel[len(c.PerLevel)-1]
	}
	return c.PerLevel[levelFromHost]
}

type locality struct {
	s          *cluster.State
	multi      int
	atMin      []int // per level (index = level), multi-node gangs at the minimum
	spanned    []int // per level, total domains spanned
	pciePods   int
	pcieAtMin  int
	slowdowns  float64
	slowdownN  int
	minDomains map[minKey]int
}

type minKey struct {
	level, gpus, pods int
	mask              cluster.ModelMask
}

func newLocality(s *cluster.State) *locality {
	n := len(s.Levels())
	return &locality{s: s, atMin: make([]int, n), spanned: make([]int, n), minDomains: map[minKey]int{}}
}

// record measures a started job's placement and returns its slowdown.
func (l *locality) record(jr *jobRun, comm *CommModel) float64 { return l.measure(jr, comm, true) }

// slowdown is a restarted job's slowdown; only first starts are counted in
// the locality figures.
func (l *locality) slowdown(jr *jobRun, comm *CommModel) float64 { return l.measure(jr, comm, false) }

func (l *locality) measure(jr *jobRun, comm *CommModel, count bool) float64 {
	var c localityCounts
	slow := l.count(jr, comm, &c)
	if count {
		l.add(c)
		l.slowdowns += slow
		l.slowdownN++
	}
	return slow
}

// localityCounts is one job's contribution to the locality figures.
type localityCounts struct {
	pciePods, pcieAtMin, multi int
	atMin, spanned             map[int]int
}

func (l *locality) add(c localityCounts) {
	l.pciePods += c.pciePods
	l.pcieAtMin += c.pcieAtMin
	l.multi += c.multi
	for lv, v := range c.atMin {
		l.atMin[lv] += v
	}
	for lv, v := range c.spanned {
		l.spanned[lv] += v
	}
}

func (l *locality) count(jr *jobRun, comm *CommModel, c *localityCounts) float64 {
	c.atMin, c.spanned = map[int]int{}, map[int]int{}
	s := l.s
	slow := 1.0
	// Inside nodes: multi-GPU pods on the fewest PCIe switches possible.
	var gpus, pods int
	var mask cluster.ModelMask
	nodes := map[int]bool{}
	for _, b := range jr.bound {
		nodes[b.NodeIndex] = true
		k := len(b.Alloc.Devices)
		if k > 0 && b.Alloc.Devices[0].Milli == 1000 {
			gpus = max(gpus, k)
			pods++
			mask |= 1 << uint(s.DeviceModel(b.NodeIndex, b.Alloc.Devices[0].Device))
		}
		if k < 2 {
			continue
		}
		node := s.Node(b.NodeIndex)
		devs := make([]int, k)
		for i, d := range b.Alloc.Devices {
			devs[i] = d.Device
		}
		_, _, _, pcie := placement.Spans(node, devs)
		least := fewestSwitches(node, k)
		c.pciePods++
		if pcie <= least {
			c.pcieAtMin++
		} else {
			slow += comm.PCIe * float64(pcie-least)
		}
	}
	if len(nodes) > 1 && pods > 0 {
		c.multi++
		host := s.HostLevel()
		for lv := host; lv >= 1; lv-- {
			doms := map[cluster.DomainID]bool{}
			for n := range nodes {
				doms[s.NodeDomain(n, lv)] = true
			}
			least := l.fewestDomains(lv, gpus, pods, mask)
			c.spanned[lv] += len(doms)
			if len(doms) <= least {
				c.atMin[lv]++
			} else {
				slow += comm.penalty(host-lv) * float64(len(doms)-least)
			}
		}
	}
	return slow
}

// fewestSwitches is the fewest PCIe switches of the node that hold k GPUs.
func fewestSwitches(node *cluster.Node, k int) int {
	per := map[int]int{}
	for _, d := range node.Devices {
		per[d.PCIeSwitch]++
	}
	sizes := make([]int, 0, len(per))
	for _, c := range per {
		sizes = append(sizes, c)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(sizes)))
	n := 0
	for _, c := range sizes {
		if k <= 0 {
			break
		}
		k -= c
		n++
	}
	return n
}

// fewestDomains is the fewest level-lv domains whose empty capacity holds
// pods of gpus GPUs each.
func (l *locality) fewestDomains(lv, gpus, pods int, mask cluster.ModelMask) int {
	key := minKey{lv, gpus, pods, mask}
	if v, ok := l.minDomains[key]; ok {
		return v
	}
	var fits []int
	for _, d := range l.s.DomainsAt(lv) {
		if f := l.s.CapacityFitCount(d, mask, gpus); f > 0 {
			fits = append(fits, f)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(fits)))
	n, left := 0, pods
	for _, f := range fits {
		if left <= 0 {
			break
		}
		left -= f
		n++
	}
	l.minDomains[key] = n
	return n
}

func (l *locality) summarise(s *metrics.Summary) {
	s.MultiNodeGangs = l.multi
	s.MinDomainShare = map[string]float64{}
	s.MeanDomainsSpanned = map[string]float64{}
	levels := l.s.Levels()
	for lv := 1; lv < len(levels); lv++ {
		if l.multi == 0 {
			continue
		}
		s.MinDomainShare[levels[lv]] = float64(l.atMin[lv]) / float64(l.multi)
		s.MeanDomainsSpanned[levels[lv]] = float64(l.spanned[lv]) / float64(l.multi)
	}
	if l.pciePods > 0 {
		s.MinPCIeShare = float64(l.pcieAtMin) / float64(l.pciePods)
	}
	if l.slowdownN > 0 {
		s.CommSlowdownMean = l.slowdowns / float64(l.slowdownN)
	}
}
