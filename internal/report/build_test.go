package report

import (
	"math"
	"math/rand/v2"

	"github.com/corral-dev/corral/internal/metrics"
)

// resultBuilder makes metrics.Result values for tests; a case states only
// what differs from a valid fgd run of seed 42.
type resultBuilder struct{ r metrics.Result }

func result(policy string) *resultBuilder {
	return &resultBuilder{r: metrics.Result{
		Policy: policy, Seed: 42, Cluster: "openb", Trace: "default", Protocol: "fgd",
		Summary: metrics.Summary{Nodes: 4, GPUs: 32, CapacityMilli: 32000},
	}}
}

func (b *resultBuilder) Seed(s int64) *resultBuilder       { b.r.Seed = s; return b }
func (b *resultBuilder) Protocol(p string) *resultBuilder  { b.r.Protocol = p; return b }
func (b *resultBuilder) Trace(t string) *resultBuilder     { b.r.Trace = t; return b }
func (b *resultBuilder) Waits(w ...float64) *resultBuilder { b.r.Series.Waits = w; return b }
func (b *resultBuilder) Obj() metrics.Result               { return b.r }
func (b *resultBuilder) Alloc(p ...metrics.Point) *resultBuilder {
	b.r.Series.AllocVsArrived = p
	return b
}
func (b *resultBuilder) Util(p ...metrics.Point) *resultBuilder {
	b.r.Series.Utilization = p
	return b
}

// Sum edits the summary.
func (b *resultBuilder) Sum(edit func(s *metrics.Summary)) *resultBuilder {
	edit(&b.r.Summary)
	return b
}

// Unalloc sets the unallocated GPU % at 100, 110, 120 and 130% arrived.
func (b *resultBuilder) Unalloc(at100, at110, at120, at130 float64) *resultBuilder {
	b.r.Summary.UnallocatedAt = map[string]float64{"100": at100, "110": at110, "120": at120, "130": at130}
	b.r.Summary.UnallocatedGPUPct = at130
	b.r.Summary.GPUAllocPct = 100 - at130
	return b
}

// Replay makes the run a replay with the given waits (seconds) and jobs.
func (b *resultBuilder) Replay(p50, p95, waitMax float64, completed int) *resultBuilder {
	b.r.Protocol = "replay"
	s := &b.r.Summary
	s.WaitP50S, s.WaitP95S, s.WaitMaxS = p50, p95, waitMax
	s.JobsSubmitted, s.JobsStarted, s.JobsCompleted = completed, completed, completed
	return b
}

func pts(xy ...float64) []metrics.Point {
	out := make([]metrics.Point, 0, len(xy)/2)
	for i := 0; i+1 < len(xy); i += 2 {
		out = append(out, metrics.Point{X: xy[i], Y: xy[i+1]})
	}
	return out
}

// synthetic is a plausible run with long series, for rendering whole
// reports: an fgd allocation curve with one point per pod, a week of
// utilization samples every minute, and thousands of log-normal waits.
// quality in (0, 1] scales how well the policy packs.
func synthetic(policy string, seed int64, protocol string, quality float64) metrics.Result {
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	b := result(policy).Seed(seed).Protocol(protocol)
	var alloc []metrics.Point
	knee := 80 + 15*quality
	for x := 0.0; x < 130; x += 0.013 + rng.Float64()*0.004 {
		y := x
		if x > knee { // past the knee, a share of arrivals no longer fits
			y = knee + (100-knee)*(1-math.Exp(-(x-knee)/(8+6*quality)))*(0.9+0.08*quality)
		}
		alloc = append(alloc, metrics.Point{X: x, Y: math.Min(y+rng.NormFloat64()*0.05, 100)})
	}
	var util []metrics.Point
	walk := 0.0
	for m := 0; m < 7*24*60; m++ {
		h := float64(m) / 60
		walk = 0.98*walk + rng.NormFloat64()*0.4 // jobs come and go: a wandering level, not noise
		y := 55 + 20*quality + 12*math.Sin(h/24*2*math.Pi) + walk
		util = append(util, metrics.Point{X: h, Y: math.Max(0, math.Min(100, y))})
	}
	waits := make([]float64, 5000)
	for i := range waits {
		if rng.Float64() < 0.3*quality {
			continue // started at once
		}
		waits[i] = math.Exp(5 + 2.2*rng.NormFloat64() - 1.5*quality)
	}
	unalloc := func(at float64) float64 { return 100 - alloc[firstAtLeast(alloc, at)].Y }
	return b.Alloc(alloc...).Util(util...).Waits(waits...).
		Unalloc(unalloc(100), unalloc(110), unalloc(120), unalloc(129.9)).
		Sum(func(s *metrics.Summary) {
			s.FragPct = 6 - 4*quality
			s.DecisionMeanUS = 40 + 200*quality
			s.UtilizationPct = 55 + 20*quality
			s.WaitP50S, s.WaitP95S, s.WaitMaxS = 150/quality, 3700/quality, 86400/quality
			s.JCTMeanS = 7200 + 600/quality
			s.JobsSubmitted, s.JobsStarted, s.JobsCompleted, s.JobsNeverFit, s.JobsStillPending = 5110, 5000, 4890, 3, 107
			s.PartialGangs = int(10 * (1 - quality))
			s.MultiNodeGangs = 120
			s.MinDomainShare = map[string]float64{"block": 0.9 + 0.1*quality, "rack": 0.5 + 0.4*quality, "spine": 0.7 + 0.3*quality}
			s.MinPCIeShare = 0.6 + 0.4*quality
			s.CommSlowdownMean = 1 + 0.2*(1-quality)
		}).Obj()
}

func firstAtLeast(p []metrics.Point, x float64) int {
	for i, q := range p {
		if q.X >= x {
			return i
		}
	}
	return len(p) - 1
}
