package trace

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

func mustCluster(t *testing.T, spec string) *ClusterSpec {
	t.Helper()
	c, err := LoadCluster(spec)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGenLLMDeterministic(t *testing.T) {
	c := mustCluster(t, "dgx-h100")
	gen := func(spec string, seed int64) []Job {
		tr, err := LoadTrace(spec, Options{Seed: seed, Cluster: c})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Jobs
	}
	a, b := gen("gen:llm?jobs=500", 7), gen("gen:llm?jobs=500", 7)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed, different traces (-first +second):\n%s", diff)
	}
	if cmp.Equal(a, gen("gen:llm?jobs=500", 8)) {
		t.Error("seeds 7 and 8 gave the same trace")
	}
	// A seed in the spec wins over Options.Seed.
	if diff := cmp.Diff(a, gen("gen:llm?jobs=500&seed=7", 99)); diff != "" {
		t.Errorf("spec seed ignored (-want +got):\n%s", diff)
	}
}

func TestGenLLMFigures(t *testing.T) {
	c := mustCluster(t, "dgx-h100")
	const load = 0.9
	tr, err := LoadTrace("gen:llm?jobs=20000", Options{Seed: 42, Cluster: c, Load: load})
	if err != nil {
		t.Fatal(err)
	}
	var gpus, work float64
	var last time.Time
	declared := 0
	for i, j := range tr.Jobs {
		if err := j.Validate(); err != nil {
			t.Fatal(err)
		}
		if i > 0 && j.Submit.Before(tr.Jobs[i-1].Submit) {
			t.Fatalf("%s submitted before %s", j.ID, tr.Jobs[i-1].ID)
		}
		gpus += j.GPUs()
		work += j.GPUs() * j.Runtime.Seconds()
		last = j.Submit
		if j.Runtime <= 0 || j.Runtime > maxRuntime {
			t.Fatalf("%s runtime %v", j.ID, j.Runtime)
		}
		if j.ExpectedRuntime != 0 {
			declared++
			if j.ExpectedRuntime < j.Runtime && j.ExpectedRuntime != maxRuntime || !slices.Contains(popularEstimates, j.ExpectedRuntime) {
				t.Fatalf("%s expects %v for a %v run", j.ID, j.ExpectedRuntime, j.Runtime)
			}
		}
		if j.CheckpointInterval > 0 && (j.CheckpointEvery < j.CheckpointInterval/2 || j.CheckpointEvery > j.CheckpointInterval*3/2 ||
			j.CheckpointJitter != defaultCkptJitter) {
			t.Fatalf("%s declares checkpoints every %v, takes them every %v ± %g", j.ID, j.CheckpointInterval,
				j.CheckpointEvery, j.CheckpointJitter)
		}
	}
	// Most jobs declare no runtime (the default share is 20%).
	if share := float64(declared) / float64(len(tr.Jobs)); math.Abs(share-defaultDeclared) > 0.02 {
		t.Errorf("%.1f%% of jobs declare a runtime, want %.0f%%", 100*share, 100*defaultDeclared)
	}
	mean := gpus / float64(len(tr.Jobs))
	if math.Abs(mean-kalosMeanGPUs) > 0.2*kalosMeanGPUs {
		t.Errorf("mean job size %.1f GPUs, want %.1f ± 20%%", mean, kalosMeanGPUs)
	}
	// The last arrival falls just short of the span, so the measured load is
	// a little above the target.
	offered := work / (float64(c.GPUs()) * last.Sub(Epoch).Seconds())
	if offered < load || offered > load*1.01 {
		t.Errorf("offered load %.3f, want %.2f", offered, load)
	}
}

func TestGenLLMShape(t *testing.T) {
	cases := map[string]struct {
		cluster string
		size    int
		want    workload.Job
	}{
		"one GPU": {"dgx-h100", 1, workload.Job{PodSets: []workload.PodSet{{Name: "workers", Count: 1,
			Request: workload.Request{CPUMilli: 28000, MemMiB: 262144, GPUs: 1}}}}},
		"a full node": {"dgx-h100", 8, workload.Job{PodSets: []workload.PodSet{{Name: "workers", Count: 1,
			Request: workload.Request{CPUMilli: 224000, MemMiB: 2097152, GPUs: 8}}}}},
		"a rack": {"dgx-h100", 128, workload.Job{MinMembers: 16, CheckpointInterval: 30 * time.Minute,
			Topology: workload.Topology{Required: "rack"},
			PodSets: []workload.PodSet{{Name: "workers", Count: 16,
				Request: workload.Request{CPUMilli: 224000, MemMiB: 2097152, GPUs: 8}}}}},
		"above a rack": {"dgx-h100", 256, workload.Job{MinMembers: 32, CheckpointInterval: 30 * time.Minute,
			Topology: workload.Topology{Preferred: "block"},
			PodSets: []workload.PodSet{{Name: "workers", Count: 32,
				Request: workload.Request{CPUMilli: 224000, MemMiB: 2097152, GPUs: 8}}}}},
		// lingjun's median ToR holds 8 hosts: 64 GPUs.
		"lingjun in a ToR": {"lingjun", 64, workload.Job{MinMembers: 8, CheckpointInterval: 30 * time.Minute,
			Topology: workload.Topology{Required: "asw"},
			PodSets: []workload.PodSet{{Name: "workers", Count: 8,
				Request: workload.Request{CPUMilli: 224000, MemMiB: 2097152, GPUs: 8}}}}},
		"lingjun above a ToR": {"lingjun", 128, workload.Job{MinMembers: 16, CheckpointInterval: 30 * time.Minute,
			Topology: workload.Topology{Preferred: "psw"},
			PodSets: []workload.PodSet{{Name: "workers", Count: 16,
				Request: workload.Request{CPUMilli: 224000, MemMiB: 2097152, GPUs: 8}}}}},
		"openb has no levels": {"openb", 16, workload.Job{MinMembers: 2, CheckpointInterval: 30 * time.Minute,
			PodSets: []workload.PodSet{{Name: "workers", Count: 2,
				Request: workload.Request{CPUMilli: 128000, MemMiB: 786432, GPUs: 8}}}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := llmShapeFor(mustCluster(t, tc.cluster))
			if err != nil {
				t.Fatal(err)
			}
			var got workload.Job
			s.podSets(&got, tc.size)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("podSets(%d) (-want +got):\n%s", tc.size, diff)
			}
		})
	}
}

func TestPowerOfTwoSizes(t *testing.T) {
	cases := map[string]struct {
		max              int
		target, wantMean float64
	}{
		"kalos":          {1024, 26.8, 26.8},
		"small cluster":  {64, 16, 16},
		"one node":       {8, 2, 2},
		"unreachable":    {4, 26.8, 4},
		"single size":    {1, 26.8, 1},
		"tiny mean ever": {1024, 1, 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := powerOfTwoSizes(tc.max, tc.target)
			if math.Abs(d.mean-tc.wantMean) > 0.01 {
				t.Errorf("mean %.3f, want %.3f", d.mean, tc.wantMean)
			}
			if d.sizes[len(d.sizes)-1] != tc.max || math.Abs(d.cdf[len(d.cdf)-1]-1) > 1e-12 {
				t.Errorf("sizes %v cdf %v", d.sizes, d.cdf)
			}
		})
	}
}

func TestGenErrors(t *testing.T) {
	c := mustCluster(t, "dgx-h100:blocks=1,racks=1,nodes=2")
	cpuOnly := &ClusterSpec{Name: "cpu", Nodes: c.Nodes[:1]}
	cpuOnly.Nodes = append([]cluster.Node(nil), cpuOnly.Nodes...)
	cpuOnly.Nodes[0].Devices = nil
	cases := map[string]struct {
		spec string
		opt  Options
		want string
	}{
		"no cluster":        {"gen:llm", Options{}, "gen:llm: the generator sizes jobs to a cluster: give one"},
		"unknown generator": {"gen:hpc", Options{Cluster: c}, `unknown generator "gen:hpc" (known: gen:llm, gen:mig)`},
		"unknown parameter": {"gen:llm?size=3", Options{Cluster: c}, `gen:llm?size=3: unknown parameter "size" (known: jobs, load, seed, late, ckpt, restart, est, declared, ckptspread, ckptjitter, users, userspread)`},
		"bad users":         {"gen:llm?users=-1", Options{Cluster: c}, `gen:llm?users=-1: users=-1: want 0..10000 users per queue (0: none)`},
		"bad user spread":   {"gen:llm?userspread=0", Options{Cluster: c}, `gen:llm?userspread=0: userspread=0: want a standard deviation of ln(runtime) in (0, 100]`},
		"bad est":           {"gen:llm?est=always", Options{Cluster: c}, `gen:llm?est=always: est="always": want model, none, hours or exact`},
		"bad share":         {"gen:llm?declared=2", Options{Cluster: c}, `gen:llm?declared=2: declared=2: want a share in [0, 1]`},
		"bad number":        {"gen:llm?jobs=many", Options{Cluster: c}, `gen:llm?jobs=many: jobs="many" is not a number`},
		"zero load":         {"gen:llm?load=0", Options{Cluster: c}, `gen:llm?load=0: load=0: want a share of GPU capacity above 0 (0.9 = 90%)`},
		"no GPUs":           {"gen:llm", Options{Cluster: cpuOnly}, "gen:llm: cluster cpu has no GPUs"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := LoadTrace(tc.spec, tc.opt)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
}
