package sim

import (
	"sort"

	"github.com/corral-dev/corral/internal/metrics"
	"github.com/corral-dev/corral/internal/workload"
)

func (r *replay) summarise() {
	s := &r.res.Summary
	s.JobsSubmitted = len(r.jobs)
	var jcts []float64
	for _, jr := range r.jobs {
		if jr.finished && !jr.terminated {
			jcts = append(jcts, jr.end.Sub(jr.job.Submit).Seconds())
		}
		switch {
		case jr.started || jr.rejected:
		case jr.aboveLimit != "":
			s.JobsOverQueueLimit++
			r.rej = append(r.rej, Rejection{Job: jr.job.ID, Source: jr.job.Source, Reason: jr.aboveLimit})
		default:
			s.JobsStillPending++
		}
	}
	s.MakespanS = r.lastT.Sub(r.first).Seconds()
	r.fair.summarise(s, r.lastArr.Sub(r.first).Seconds())
	if span := r.lastArr.Sub(r.first).Seconds(); span > 0 && r.capacity > 0 {
		s.UtilizationPct = 100 * r.usefulArea / (span * float64(r.capacity))
		s.AllocatedPct = 100 * r.area / (span * float64(r.capacity))
	}
	if s.MakespanS > 0 && r.capacity > 0 {
		s.UtilizationMakespanPct = 100 * r.usefulAll / (s.MakespanS * float64(r.capacity))
	}
	s.GPUAllocPct = pct(r.allocated, r.capacity)
	s.UnallocatedGPUPct = 100 - s.GPUAllocPct
	s.WholeGPUAllocPct = wholeAllocPct(r.state)
	s.FragPct = pct(int64(clusterFrag(r.state, r.arrived.Mix(64))), r.capacity)
	waits := append([]float64(nil), r.res.Series.Waits...)
	s.WaitP50S, s.WaitP95S, s.WaitMaxS, s.WaitMeanS = quantiles(waits)
	s.JCTP50S, s.JCTP95S, _, s.JCTMeanS = quantiles(jcts)
	if s.PodsPlaced > 0 {
		s.DecisionMeanUS = r.engineSec * 1e6 / float64(s.PodsPlaced)
	}
	if s.Cycles > 0 {
		s.CycleMeanUS = r.engineSec * 1e6 / float64(s.Cycles)
	}
	r.loc.summarise(s)
	r.summariseFailures()
	r.largeJobWaits(s)
	r.wholeRun(s)
}

// wholeRun adds the figures over the whole run: GPUs allocated whatever they
// did, and waits and JCTs by job size, never-started jobs counted with their
// wait until the end of the run rather than dropped.
func (r *replay) wholeRun(s *metrics.Summary) {
	if s.MakespanS > 0 && r.capacity > 0 {
		s.AllocatedMakespanPct = 100 * r.fail.allocArea / (s.MakespanS * float64(r.capacity))
		var work float64 // GPU-seconds at full speed
		for _, jr := range r.jobs {
			if jr.finished && !jr.terminated {
				work += jr.job.GPUs() * jr.job.Runtime.Seconds()
			}
		}
		s.WorkMakespanPct = 100 * work / (s.MakespanS * float64(r.capacity) / workload.MilliPerGPU)
	}
	var all []float64
	waits := make([][]float64, len(metrics.SizeClasses))
	jcts := make([][]float64, len(metrics.SizeClasses))
	classes := make([]metrics.SizeClass, len(metrics.SizeClasses))
	for c := range classes {
		classes[c].Class = metrics.SizeClasses[c].Name
	}
	for _, jr := range r.jobs {
		if jr.rejected {
			continue
		}
		c := 0
		for c < len(metrics.SizeClasses)-1 && jr.job.GPUs() > metrics.SizeClasses[c].Max {
			c++
		}
		classes[c].Jobs++
		w := r.lastT.Sub(jr.job.Submit).Seconds()
		if jr.waited {
			w = jr.wait
			classes[c].Started++
		}
		all = append(all, w)
		waits[c] = append(waits[c], w)
		if jr.finished && !jr.terminated {
			classes[c].Completed++
			jcts[c] = append(jcts[c], jr.end.Sub(jr.job.Submit).Seconds())
		}
	}
	_, s.WaitCensoredP95S, _, s.WaitCensoredMeanS = quantiles(all)
	for c := range classes {
		if classes[c].Jobs == 0 {
			continue
		}
		_, classes[c].WaitP95S, _, classes[c].WaitMeanS = quantiles(waits[c])
		_, classes[c].JCTP95S, _, classes[c].JCTMeanS = quantiles(jcts[c])
		s.SizeClasses = append(s.SizeClasses, classes[c])
	}
}

// largeJobWaits measures the waits of the largest jobs: those at or above
// the 95th percentile of GPU size among the jobs submitted (the same set
// for every policy on one input). A large job that never started counts
// with the time it waited until the end of the run, so starvation shows.
func (r *replay) largeJobWaits(s *metrics.Summary) {
	var sizes []float64
	for _, jr := range r.jobs {
		sizes = append(sizes, jr.job.GPUs())
	}
	if len(sizes) == 0 {
		return
	}
	_, p95, _, _ := quantiles(sizes)
	if p95 <= 0 {
		return
	}
	var waits []float64
	for _, jr := range r.jobs {
		if jr.job.GPUs() < p95 || jr.rejected {
			continue
		}
		switch {
		case jr.waited:
			waits = append(waits, jr.wait)
		default:
			waits = append(waits, r.lastT.Sub(jr.job.Submit).Seconds())
		}
	}
	s.LargeJobMinGPUs = p95
	s.LargeJobs = len(waits)
	_, s.LargeWaitP95S, s.LargeWaitMaxS, s.LargeWaitMeanS = quantiles(waits)
}

// quantiles returns p50, p95, max and mean of xs (sorted in place).
func quantiles(xs []float64) (p50, p95, maxV, mean float64) {
	if len(xs) == 0 {
		return 0, 0, 0, 0
	}
	sort.Float64s(xs)
	q := func(p float64) float64 {
		i := int(p*float64(len(xs))+0.5) - 1
		i = max(0, min(i, len(xs)-1))
		return xs[i]
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return q(0.50), q(0.95), xs[len(xs)-1], sum / float64(len(xs))
}
