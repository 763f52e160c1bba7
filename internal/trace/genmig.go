package trace

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/mig"
	"github.com/corral-dev/corral/internal/workload"
)

// The "mig" cluster preset and the gen:mig generator: a small scenario for
// MIG placement and re-partitioning.
//
// The cluster alternates DGX A100 80GB and DGX H100 nodes (8 GPUs each, the
// DGX layout), every GPU in MIG mode and partitioned as mig-parted's
// "all-balanced" configuration does for 80 GB parts (NVIDIA/mig-parted,
// deployments/systemd/config-default.yaml): two 1g.10gb, one 2g.20gb and one
// 3g.40gb, which leave one memory slice without an instance; with
// layout=mixed the GPUs of a node get several of its configurations
// (migMixed). The admin's static layout is the baseline's lot; corral may
// re-partition idle GPUs.
//
// gen:mig draws one-pod jobs asking one instance each, with a mix that the
// balanced layout does not match (more 1g and 7g requests than it offers).
// Both products use the same profile names, so every request fits both.

// migBalanced is mig-parted's all-balanced for 80 GB parts.
var migBalanced = map[string]int{"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}

// migMix is gen:mig's profile mix: profile and share of jobs.
var migMix = []struct {
	profile string
	share   float64
}{
	{"1g.10gb", 0.45}, {"2g.20gb", 0.20}, {"3g.40gb", 0.15}, {"4g.40gb", 0.10}, {"7g.80gb", 0.10},
}

// Resources a MIG job asks per compute slice of its instance, so that CPU and
// memory never bind before the GPUs do on a DGX node.
const (
	migCPUPerSlice = 3_000
	migMemPerSlice = 16 << 10
	migMeanRuntime = time.Hour
)

// migMixed is the "layout=mixed" static partitioning, per GPU of a node:
// mig-parted's all-1g.10gb twice, all-2g.20gb, all-3g.40gb, all-balanced,
// a 4g + 3g, and all-7g.80gb twice, so that every profile of gen:mig has
// instances somewhere.
var migMixed = []map[string]int{
	{"1g.10gb": 7}, {"1g.10gb": 7}, {"2g.20gb": 3}, {"3g.40gb": 2}, migBalanced,
	{"4g.40gb": 1, "3g.40gb": 1}, {"7g.80gb": 1}, {"7g.80gb": 1},
}

func migCluster(spec, params string) (*ClusterSpec, error) {
	nodes, static := 16, "balanced"
	bad := fmt.Errorf("cluster %q: want mig[:nodes=N][,layout=balanced|mixed] (N in 1..%d)", spec, defaultLimits.nodes)
	if params != "" {
		for _, kv := range strings.Split(params, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "nodes":
				n, err := strconv.Atoi(v)
				if err != nil || n <= 0 || n > defaultLimits.nodes {
					return nil, bad
				}
				nodes = n
			case "layout":
				if v != "balanced" && v != "mixed" {
					return nil, bad
				}
				static = v
			default:
				return nil, bad
			}
		}
	}
	c := &ClusterSpec{Name: spec}
	for i := range nodes {
		model, geom := "A100-80GB", "A100-80GB"
		if i%2 == 1 {
			model, geom = "H100", "H100-80GB"
		}
		g, _ := mig.Lookup(geom)
		n := dgxNode(fmt.Sprintf("mig-%02d", i), model, map[string]string{})
		for k := range n.Devices {
			want := migBalanced
			if static == "mixed" {
				want = migMixed[k%len(migMixed)]
			}
			layout, ok := g.Repartition(want)
			if !ok {
				return nil, fmt.Errorf("cluster %q: layout %v does not fit %s", spec, want, geom)
			}
			n.Devices[k].MIG, n.Devices[k].MIGLayout = geom, layout
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c, c.check(spec)
}

// genMIG draws p.jobs one-instance jobs from migMix with exponential
// runtimes, arriving as a Poisson process that offers p.load of the
// cluster's compute slices.
func genMIG(p genParams, c *ClusterSpec) (*Trace, error) {
	var slices7 int
	for _, n := range c.Nodes {
		for _, d := range n.Devices {
			if d.MIG != "" {
				slices7 += mig.ComputeSlices
			}
		}
	}
	if slices7 == 0 {
		return nil, fmt.Errorf("gen:mig: cluster %s has no MIG GPUs (try --cluster mig)", c.Name)
	}
	rng := rand.New(rand.NewPCG(uint64(p.seed), 0x6d6967)) // "mig"
	t := &Trace{Name: fmt.Sprintf("gen:mig?jobs=%d&load=%g&seed=%d", p.jobs, p.load, p.seed)}
	var work float64 // compute-slice-seconds offered
	for i := 0; i < p.jobs; i++ {
		x, profile := rng.Float64(), migMix[len(migMix)-1].profile
		for _, m := range migMix {
			if x < m.share {
				profile = m.profile
				break
			}
			x -= m.share
		}
		runtime := time.Duration(-math.Log(1-rng.Float64()) * float64(migMeanRuntime)).Truncate(time.Second)
		runtime = max(runtime, time.Minute)
		sl := workload.MIGCompute(profile)
		j := &workload.Job{
			ID:     workload.JobID(fmt.Sprintf("mig-%05d", i)),
			Queue:  "default",
			Source: fmt.Sprintf("%s:%d", t.Name, i),
			PodSets: []workload.PodSet{{Name: "worker", Count: 1, Request: workload.Request{
				CPUMilli: int64(sl) * migCPUPerSlice, MemMiB: int64(sl) * migMemPerSlice, GPUs: 1, MIGProfile: profile,
			}}},
		}
		work += float64(sl) * runtime.Seconds()
		t.Jobs = append(t.Jobs, Job{Job: j, Runtime: runtime})
	}
	span := work / (p.load * float64(slices7))
	at := make([]float64, p.jobs)
	for i := range at {
		at[i] = rng.Float64() * span
	}
	slices.Sort(at)
	for i := range t.Jobs {
		t.Jobs[i].Submit = Epoch.Add(time.Duration(at[i]) * time.Second)
	}
	return t, nil
}
