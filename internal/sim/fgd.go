package sim

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/metrics"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// FGDTarget is the share of GPU capacity the fgd protocol lets arrive.
const FGDTarget = 1.30

// FGDCheckpoints are the arrived-% marks the protocol reports.
var FGDCheckpoints = []int{100, 110, 120, 130}

// fgdWorkload resamples jobs as the FGD paper does: keep every job, append
// copies drawn uniformly with replacement until one more would push the GPU
// request past target × capacity, then shuffle. The seed fixes both draws.
func fgdWorkload(jobs []Job, capacity int64, seed int64) []*workload.Job {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x636f7272616c)) // "corral"
	out := make([]*workload.Job, 0, len(jobs)*2)
	var total int64
	for _, j := range jobs {
		out = append(out, j.Job)
		total += j.GPUMilli()
	}
	limit := int64(FGDTarget * float64(capacity))
	for copyN := 0; len(jobs) > 0; copyN++ {
		j := jobs[rng.IntN(len(jobs))].Job
		if total+j.GPUMilli() > limit {
			break
		}
		c := *j
		c.ID = workload.JobID(string(j.ID) + "#" + strconv.Itoa(copyN))
		out = append(out, &c)
		total += j.GPUMilli()
	}
	rng.Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	return out
}

func runFGD(state *cluster.State, eng Scheduler, jobs []Job, cfg Config, res *metrics.Result) ([]Rejection, error) {
	capacity := state.CapacityMilli()
	if capacity == 0 {
		return nil, fmt.Errorf("the fgd protocol needs GPUs; the cluster has none")
	}
	order := fgdWorkload(jobs, capacity, cfg.Seed)
	if cfg.Protocol == FGDOffline {
		sort.SliceStable(order, func(a, b int) bool {
			ga, gb := order[a].GPUMilli(), order[b].GPUMilli()
			if ga != gb {
				return ga > gb
			}
			ca, cb := jobCPU(order[a]), jobCPU(order[b])
			if ca != cb {
				return ca > cb
			}
			return order[a].ID < order[b].ID
		})
	}
	var (
		mix       placement.MixCounter
		arrived   int64
		allocated int64
		rej       []Rejection
		engineDur float64
		next      = 0
		series    []metrics.Point
	)
	at := map[string]float64{}
	fragAt := map[string]float64{}
	// Fragmentation is measured against the trace's own mix, as the paper does.
	var fullMix placement.MixCounter
	for _, j := range order {
		j.EachPod(func(_ workload.PodRef, r workload.Request) { fullMix.Observe(r, 1) })
	}
	measureMix := fullMix.Mix(0)
	// The scheduler's mix is the pods present (engine.MixOf's meaning, as
	// on Kubernetes): those placed so far and the job arriving. Nothing
	// ends in this protocol, so only the jobs that found no room leave it.
	var published placement.Mix
	present, publishedAt := 0, 0
	for i, j := range order {
		j.EachPod(func(_ workload.PodRef, r workload.Request) { mix.Observe(r, 1); present++ })
		// Publish the mix as a scheduler would refresh it: whenever the
		// present pods grew by a tenth since the last refresh.
		if published == nil || present >= publishedAt+publishedAt/10+1 {
			published, publishedAt = mix.Mix(0), present
		}
		arrived += j.GPUMilli()
		snap := &engine.Snapshot{
			State:   state,
			Pending: []engine.PendingJob{{Job: j}},
			Mix:     published,
		}
		t0 := cfg.Clock()
		plan := eng.Cycle(snap)
		engineDur += cfg.Clock().Sub(t0).Seconds()
		res.Summary.Cycles++
		if len(plan.Repartitions) > 0 {
			// Re-partitioned at once: place the pod on its new instance.
			if err := repartition(state, plan, res); err != nil {
				return rej, err
			}
			t0 = cfg.Clock()
			plan = eng.Cycle(snap)
			engineDur += cfg.Clock().Sub(t0).Seconds()
			res.Summary.Cycles++
		}
		if len(plan.Binds) == 0 {
			j.EachPod(func(_ workload.PodRef, r workload.Request) { mix.Forget(r, 1); present-- })
		}
		for _, b := range plan.Binds {
			if err := apply(state, b); err != nil {
				return rej, err
			}
			for _, p := range b.Pods {
				allocated += p.Alloc.GPUMilli()
				res.Summary.PodsPlaced++
			}
			res.Summary.JobsStarted++
		}
		for _, p := range plan.Pending {
			if p.Reason.Verdict == placement.NeverFits {
				res.Summary.JobsNeverFit++
				rej = append(rej, Rejection{Job: p.Job, Source: j.Source, Reason: p.Reason.Message})
			}
		}
		arrivedPct, allocPct := pct(arrived, capacity), pct(allocated, capacity)
		series = append(series, metrics.Point{X: arrivedPct, Y: allocPct})
		for next < len(FGDCheckpoints) && arrivedPct >= float64(FGDCheckpoints[next]) {
			key := strconv.Itoa(FGDCheckpoints[next])
			at[key] = 100 - allocPct
			fragAt[key] = pct(int64(clusterFrag(state, measureMix)), capacity)
			next++
		}
		if cfg.Progress != nil && (i%256 == 0 || i == len(order)-1) {
			cfg.Progress(i+1, len(order))
		}
	}
	// The last draw may stop just short of the final mark: report the end.
	for ; next < len(FGDCheckpoints); next++ {
		key := strconv.Itoa(FGDCheckpoints[next])
		at[key] = 100 - pct(allocated, capacity)
		fragAt[key] = pct(int64(clusterFrag(state, measureMix)), capacity)
	}
	s := &res.Summary
	s.JobsSubmitted = len(order)
	s.JobsStillPending = s.JobsSubmitted - s.JobsStarted - s.JobsNeverFit
	s.GPUAllocPct = pct(allocated, capacity)
	s.UnallocatedGPUPct = 100 - s.GPUAllocPct
	s.WholeGPUAllocPct = wholeAllocPct(state)
	s.FragPct = pct(int64(clusterFrag(state, measureMix)), capacity)
	s.UnallocatedAt, s.FragAt = at, fragAt
	if s.PodsPlaced > 0 {
		s.DecisionMeanUS = engineDur * 1e6 / float64(s.PodsPlaced)
	}
	if s.Cycles > 0 {
		s.CycleMeanUS = engineDur * 1e6 / float64(s.Cycles)
	}
	res.Series.AllocVsArrived = series
	return rej, nil
}

// clusterFrag is the cluster's expected fragmentation in GPU-milli: the free
// GPU capacity the mix could not use, summed over nodes.
func clusterFrag(s *cluster.State, mix placement.Mix) float64 {
	f := placement.NewFragScorer(s, mix, nil)
	total := 0.0
	for n := 0; n < s.NumNodes(); n++ {
		total += f.NodeFrag(s, n)
	}
	return total
}

// wholeAllocPct is the share of healthy GPUs with anything allocated.
func wholeAllocPct(s *cluster.State) float64 {
	used, all := 0, 0
	for n := 0; n < s.NumNodes(); n++ {
		for k, f := range s.GPUFree(n) {
			if !s.DeviceHealthy(n, k) {
				continue
			}
			all++
			if f < 1000 {
				used++
			}
		}
	}
	return pct(int64(used), int64(all))
}

func jobCPU(j *workload.Job) int64 {
	var t int64
	for _, ps := range j.PodSets {
		t += int64(ps.Count) * ps.Request.CPUMilli
	}
	return t
}
