package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/mig"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/queue"
	"github.com/corral-dev/corral/internal/workload"
)

// benchCluster builds blocks × racks × 16 DGX nodes with about half of the
// GPUs already taken at random, so that placement has real choices.
func benchCluster(blocks, racks int, seed uint64) *cluster.State {
	s := dgxBlocks(blocks, racks)
	rng := rand.New(rand.NewPCG(seed, 1))
	for n := 0; n < s.NumNodes(); n++ {
		switch rng.IntN(4) {
		case 0: // every GPU taken (CPU and memory left free)
			_ = s.Allocate(n, cluster.Alloc{Devices: wholeNode().Devices})
		case 1: // a few GPUs taken
			for k := 0; k < 1+rng.IntN(6); k++ {
				_ = s.Allocate(n, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: k, Milli: 1000}}})
			}
		}
	}
	return s
}

// dgxBlocks is an empty cluster of blocks × racks × 16 DGX nodes.
func dgxBlocks(blocks, racks int) *cluster.State {
	var nodes []cluster.Node
	for b := 0; b < blocks; b++ {
		for r := 0; r < racks; r++ {
			rack := fmt.Sprintf("b%d-r%d", b, r)
			nodes = append(nodes, build.Node().Name(rack+"-n").Block(fmt.Sprintf("b%d", b)).Rack(rack).Times(16)...)
		}
	}
	return build.State(build.Topo("block", "rack"), nodes)
}

// wholeNode is what a whole-node job holds of a DGX node: its 8 GPUs.
func wholeNode() cluster.Alloc {
	a := cluster.Alloc{CPUMilli: 1000, MemMiB: 1024}
	for k := 0; k < 8; k++ {
		a.Devices = append(a.Devices, cluster.DeviceShare{Device: k, Milli: workload.MilliPerGPU})
	}
	return a
}

// runWholeNode allocates node n of s to whole-node job j, started at start.
func runWholeNode(tb testing.TB, s *cluster.State, j *workload.Job, n int, start time.Time) RunningJob {
	a := wholeNode()
	if err := s.Allocate(n, a); err != nil {
		tb.Fatal(err)
	}
	return RunningJob{Job: j, Start: start,
		Pods: []PodBind{{Placed: cluster.Placed{Pod: workload.PodRef{Job: j.ID}, NodeIndex: n, Alloc: a}, Node: s.Node(n).Name}}}
}

// benchJobs makes a mix of jobs totalling about pods pods: single GPUs,
// fractions, whole nodes and rack-bound gangs.
func benchJobs(pods int, seed uint64) []PendingJob {
	rng := rand.New(rand.NewPCG(seed, 2))
	var out []PendingJob
	total := 0
	for i := 0; total < pods; i++ {
		b := build.Job(fmt.Sprintf("j%06d", i)).Submit(int64(i))
		switch r := rng.IntN(10); {
		case r < 4:
			b = b.GPUs(1)
		case r < 6:
			b = b.Milli(250 * (1 + rng.IntN(3)))
		case r < 8:
			b = b.GPUs(8)
		default:
			b = b.Pods(2 << rng.IntN(4)).GPUs(8).Required("rack")
		}
		j := b.Obj()
		total += j.Pods()
		out = append(out, PendingJob{Job: j})
	}
	return out
}

func mixOf(jobs []PendingJob) placement.Mix {
	var m placement.MixCounter
	for _, pj := range jobs {
		for _, ps := range pj.Job.PodSets {
			m.Observe(ps.Request, ps.Count)
		}
	}
	return m.Mix(64)
}

// BenchmarkCycle measures one engine cycle over thousands of pending pods.
// pods/s counts pods considered (placed or explained) per second.
func BenchmarkCycle(b *testing.B) {
	sizes := []struct {
		name          string
		blocks, racks int
	}{
		{"1k-nodes", 4, 16},   // 1,024 nodes
		{"5k-nodes", 8, 40},   // 5,120 nodes
		{"10k-nodes", 16, 40}, // 10,240 nodes
	}
	for _, sz := range sizes {
		for _, pending := range []int{5000, 20000} {
			s := benchCluster(sz.blocks, sz.racks, 1)
			jobs := benchJobs(pending, 2)
			snap := &Snapshot{State: s, Pending: jobs, Mix: mixOf(jobs)}
			b.Run(fmt.Sprintf("%s/%d-pods", sz.name, pending), func(b *testing.B) {
				e := New(Config{Policy: Corral})
				var placed int
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					placed = e.Cycle(snap).Stats.PodsPlaced
				}
				b.ReportMetric(float64(pending)*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
				b.ReportMetric(float64(placed), "placed")
			})
		}
	}
}

// BenchmarkPlaceOne measures the placement of one pod on a busy cluster:
// the latency a newly arrived job sees.
func BenchmarkPlaceOne(b *testing.B) {
	for _, sz := range []struct {
		name          string
		blocks, racks int
	}{{"1k-nodes", 4, 16}, {"10k-nodes", 16, 40}} {
		s := benchCluster(sz.blocks, sz.racks, 1)
		jobs := benchJobs(2000, 2)
		mix := mixOf(jobs)
		for _, kind := range []struct {
			name string
			job  *workload.Job
		}{
			{"1-gpu", build.Job("one").GPUs(1).Obj()},
			{"gang-16x8-rack", build.Job("gang").Pods(16).GPUs(8).Required("rack").Obj()},
		} {
			snap := &Snapshot{State: s, Pending: []PendingJob{{Job: kind.job}}, Mix: mix}
			b.Run(sz.name+"/"+kind.name, func(b *testing.B) {
				e := New(Config{Policy: Corral})
				for i := 0; i < b.N; i++ {
					e.Cycle(snap)
				}
			})
		}
	}
}

// BenchmarkCycleQueuesPreempt measures a cycle with three queues (each
// guaranteed a quarter, reclaim on) on a cluster three quarters full of
// preemptible whole-node jobs of two queues, with a tenth of the waiting
// jobs at a higher priority: ordering, limits, preemption and reclaim all
// work in the same cycle.
func BenchmarkCycleQueuesPreempt(b *testing.B) {
	for _, sz := range []struct {
		name          string
		blocks, racks int
	}{{"1k-nodes", 4, 16}, {"5k-nodes", 8, 40}} {
		s := dgxBlocks(sz.blocks, sz.racks)
		rng := rand.New(rand.NewPCG(3, 3))
		now := time.Unix(6000, 0).UTC() // just after the last submit: nobody has waited long
		var running []RunningJob
		for n := 0; n < s.NumNodes(); n++ {
			if rng.IntN(4) == 0 {
				continue
			}
			q := []string{"team-a", "team-b"}[n%2]
			j := build.Job(fmt.Sprintf("run%05d", n)).Queue(q).GPUs(8).Preemptible().Checkpoint(30 * time.Minute).Obj()
			running = append(running, runWholeNode(b, s, j, n, now.Add(-time.Duration(1+rng.IntN(600))*time.Minute)))
		}
		jobs := benchJobs(5000, 2)
		for i, pj := range jobs {
			pj.Job.Queue = []string{"team-a", "team-b", "team-c"}[i%3]
			if i%10 == 0 {
				pj.Job.Priority = 100
			}
		}
		quarter := int64(s.NumNodes()*8/4) * workload.MilliPerGPU
		var qs []queue.Spec
		for _, name := range []string{"team-a", "team-b", "team-c"} {
			qs = append(qs, queue.Spec{Name: name, Guarantee: queue.Amounts{queue.GPU("H100"): quarter}, Reclaim: true})
		}
		snap := &Snapshot{State: s, Pending: jobs, Running: running, Queues: qs, Mix: mixOf(jobs), Now: now}
		for _, pre := range []Preemption{PreemptLeastLost, PreemptOff} {
			b.Run(sz.name+"/5000-pods/"+string(pre), func(b *testing.B) {
				e := New(Config{Policy: Corral, Preemption: pre})
				var p Plan
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					p = e.Cycle(snap)
				}
				b.ReportMetric(5000*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
				b.ReportMetric(float64(p.Stats.PodsPlaced), "placed")
				b.ReportMetric(float64(len(p.Evictions)), "evictions")
				b.ReportMetric(float64(p.Stats.PreemptEvaluations), "evaluations")
			})
		}
	}
}

// BenchmarkPlaceMIG measures one cycle for one MIG job on 1,024 DGX nodes
// (8,192 GPUs in MIG mode, each partitioned 2 × 1g.10gb + 2g.20gb +
// 3g.40gb) with about half of the instances in use and a quarter of the
// GPUs idle: a 1g.10gb that a free instance serves, and a 7g.80gb that only
// a re-partition of an idle GPU serves.
func BenchmarkPlaceMIG(b *testing.B) {
	balanced := build.Lay("1g.10gb@0 1g.10gb@1 2g.20gb@2 3g.40gb@4")
	layouts := make([]mig.Layout, 8)
	for k := range layouts {
		layouts[k] = balanced
	}
	var nodes []cluster.Node
	for r := 0; r < 64; r++ {
		rack := fmt.Sprintf("r%d", r)
		nodes = append(nodes, build.Node().Name(rack+"-n").Rack(rack).MIG("H100-80GB", layouts...).Times(16)...)
	}
	s := build.State(build.Topo("rack"), nodes)
	rng := rand.New(rand.NewPCG(1, 3))
	for n := 0; n < s.NumNodes(); n++ {
		for k := 0; k < 8; k++ {
			if rng.IntN(4) == 0 {
				continue // idle
			}
			for _, in := range balanced {
				if rng.IntN(3) > 0 {
					ref, _ := s.MIGRef(n, k, in)
					_ = s.Allocate(n, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: k, MIG: ref}}})
				}
			}
		}
	}
	var mix placement.MixCounter
	for _, p := range []string{"1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"} {
		mix.Observe(workload.Request{GPUs: 1, MIGProfile: p}, 1)
	}
	for _, kind := range []struct{ name, profile string }{{"free-instance", "1g.10gb"}, {"repartition", "7g.80gb"}} {
		snap := &Snapshot{State: s, Mix: mix.Mix(0), Pending: []PendingJob{{Job: build.Job("j").MIG(kind.profile).Obj()}}}
		b.Run(kind.name, func(b *testing.B) {
			e := New(Config{Policy: Corral})
			for i := 0; i < b.N; i++ {
				p := e.Cycle(snap)
				if len(p.Binds)+len(p.Repartitions) == 0 {
					b.Fatalf("%s: nothing placed or planned: %+v", kind.name, p.Pending)
				}
			}
		})
	}
}

// BenchmarkCycleStarvedBacklog measures a cycle after a long outage: every
// one of 5,000 waiting pods is past the starvation age, so each is a
// candidate for a starvation reservation before anything is placed.
func BenchmarkCycleStarvedBacklog(b *testing.B) {
	s := benchCluster(4, 16, 1) // 1,024 nodes
	jobs := benchJobs(5000, 2)
	snap := &Snapshot{State: s, Pending: jobs, Mix: mixOf(jobs), Now: time.Unix(0, 0).Add(48 * time.Hour)}
	e := New(Config{Policy: Corral})
	var p Plan
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p = e.Cycle(snap)
	}
	b.ReportMetric(float64(p.Stats.PodsPlaced), "placed")
	b.ReportMetric(float64(p.Stats.StarvedReservations), "starved-reservations")
}

// BenchmarkCyclePriorityPreempt measures a cycle on a cluster whose every
// node runs a preemptible whole-node job with a declared runtime and no
// queues, with a tenth of the waiting jobs at a higher priority: those can
// start only by evicting, so each victim set the search finds goes through
// the worth check (preempt.WorthEvicting), which asks backfill's replay of
// the expected ends when room would free without evicting (run.roomFrees).
func BenchmarkCyclePriorityPreempt(b *testing.B) {
	for _, sz := range []struct {
		name          string
		blocks, racks int
	}{{"1k-nodes", 4, 16}, {"5k-nodes", 8, 40}} {
		snap := fullOfPreemptible(b, sz.blocks, sz.racks, 5000)
		for _, pre := range []Preemption{PreemptLeastLost, PreemptOff} {
			b.Run(sz.name+"/5000-pods/"+string(pre), func(b *testing.B) {
				e := New(Config{Policy: Corral, Preemption: pre, CheckpointWait: -1})
				var p Plan
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					p = e.Cycle(snap)
				}
				b.ReportMetric(5000*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
				b.ReportMetric(float64(len(p.Evictions)), "evictions")
				b.ReportMetric(float64(p.Stats.PreemptEvaluations), "evaluations")
			})
		}
	}
}

// fullOfPreemptible is a snapshot of blocks × racks × 16 DGX nodes, each
// running a preemptible 8-GPU job with a declared runtime (no checkpoint:
// an eviction loses all its work), ages and runtimes varying so that some
// evictions are worth it and some are not, and about pods waiting pods, a
// tenth of the jobs at priority 100.
func fullOfPreemptible(tb testing.TB, blocks, racks, pods int) *Snapshot {
	s := dgxBlocks(blocks, racks)
	rng := rand.New(rand.NewPCG(4, 4))
	now := time.Unix(6000, 0).UTC()
	var running []RunningJob
	for n := 0; n < s.NumNodes(); n++ {
		ran := time.Duration(1+rng.IntN(48*60)) * time.Minute
		j := build.Job(fmt.Sprintf("run%05d", n)).GPUs(8).Preemptible().
			Expected(ran + time.Duration(1+rng.IntN(48*60))*time.Minute).Obj()
		running = append(running, runWholeNode(tb, s, j, n, now.Add(-ran)))
	}
	jobs := benchJobs(pods, 2)
	for i, pj := range jobs {
		if i%10 == 0 {
			pj.Job.Priority = 100
		}
	}
	return &Snapshot{State: s, Pending: jobs, Running: running, Mix: mixOf(jobs), Now: now}
}
