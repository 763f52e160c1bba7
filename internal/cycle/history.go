package cycle

import (
	"fmt"
	"math/bits"
	"sort"
	"time"

	"github.com/corral-dev/corral/internal/workload"
)

// Estimate rules. A percentile above the median makes estimates
// conservative: a backfilled job that runs longer than estimated delays the
// reservation it was let into, one that runs shorter only leaves a gap.
const (
	// EstimatePercentile is the share of completed runtimes an estimate
	// covers.
	EstimatePercentile = 0.90
	// MinSamples is how many completed runs a key needs before its
	// percentile is trusted; below it the estimate falls back to a wider key.
	MinSamples = 5
	// HistoryWindow is how many recent runtimes each key keeps.
	HistoryWindow = 200
)

// Source says where a runtime estimate came from.
type Source string

const (
	SourceNone       Source = ""            // no estimate: treated as never ending
	SourceDeclared   Source = "declared"    // the job's ExpectedRuntime
	SourceQueueShape Source = "queue+shape" // p90 of the same queue and size
	SourceQueue      Source = "queue"       // p90 of the same queue
	SourceGlobal     Source = "global"      // p90 of every job
	SourceMax        Source = "max-runtime" // only MaxRuntime was known
)

// History is the runtimes of completed jobs, by queue and shape. The driver
// owns it (Observe after each completion) and hands it to the engine in the
// snapshot; the engine only reads it. The zero value is empty and usable.
type History struct {
	keys map[string]*window
	// acc scores each kind of estimate (declared, learned) against the
	// runtimes that came true: what Confidence reports.
	acc map[Source]*scores
}

type window struct {
	runs   []time.Duration // ring of the last HistoryWindow runtimes
	next   int
	p      time.Duration   // the percentile of runs, kept current by Observe
	sorted []time.Duration // runs ascending, kept current by Observe
}

// scores is a ring of the last HistoryWindow accuracies of one kind of
// estimate, each min(actual, estimate) / max(actual, estimate).
type scores struct {
	v    []float64
	next int
	sum  float64
}

func (s *scores) add(x float64) {
	if len(s.v) < HistoryWindow {
		s.v = append(s.v, x)
		s.sum += x
		return
	}
	s.sum += x - s.v[s.next]
	s.v[s.next] = x
	s.next = (s.next + 1) % HistoryWindow
}

// Confidence is how far estimates from src have come true, in [0, 1]: the
// mean over the last completed runs of min(actual, estimate) /
// max(actual, estimate). Learned sources share one score (they are one
// method on keys of different width). Zero until MinSamples runs were
// scored: an estimate nobody has checked is not trusted. A declared
// runtime that is usually twice the real one scores about 0.5; the exact
// runtime scores 1. Before that, a declared runtime or a max runtime is
// taken at its word (an operator's own limit, a user's own claim: the
// prior a scheduler without history has), a learned one is not.
func (h *History) Confidence(src Source) float64 {
	learned := src == SourceQueueShape || src == SourceQueue || src == SourceGlobal
	if learned {
		src = SourceGlobal
	}
	var s *scores
	if h != nil && h.acc != nil {
		s = h.acc[src]
	}
	if s == nil || len(s.v) < MinSamples {
		if learned || src == SourceNone {
			return 0
		}
		return 1
	}
	return s.sum / float64(len(s.v))
}

func (h *History) score(src Source, est, d time.Duration) {
	if est <= 0 {
		return
	}
	if h.acc == nil {
		h.acc = map[Source]*scores{}
	}
	s := h.acc[src]
	if s == nil {
		s = &scores{}
		h.acc[src] = s
	}
	s.add(float64(min(est, d)) / float64(max(est, d)))
}

// Outlived is how long a job like j that has already run elapsed is
// expected to run in all, from the runtimes of the narrowest key with
// MinSamples runs longer than elapsed: their EstimatePercentile. ok is
// false when too few such runs are known (the caller then extends by its
// own rule). This is the conditional estimate of a job that outlived its
// first one: only runs at least as long say anything about it.
func (h *History) Outlived(j *workload.Job, elapsed time.Duration) (time.Duration, bool) {
	if h == nil || h.keys == nil {
		return 0, false
	}
	for _, k := range keysOf(j) {
		w := h.keys[k]
		if w == nil {
			continue
		}
		i := sort.Search(len(w.sorted), func(i int) bool { return w.sorted[i] > elapsed })
		longer := w.sorted[i:]
		if len(longer) < MinSamples {
			continue
		}
		at := int(EstimatePercentile*float64(len(longer))+0.999999) - 1
		return longer[max(0, min(at, len(longer)-1))], true
	}
	return 0, false
}

// ShapeOf is the size bucket used as "shape": the job's GPUs rounded up to a
// power of two (CPU-only jobs are "0gpu"). Sizes in one bucket behave alike
// in the published traces (runtime grows with size class, not exact size).
func ShapeOf(j *workload.Job) string {
	g := (j.GPUMilli() + workload.MilliPerGPU - 1) / workload.MilliPerGPU
	if g <= 0 {
		return "0gpu"
	}
	return fmt.Sprintf("%dgpu", uint64(1)<<bits.Len64(uint64(g-1)))
}

func keysOf(j *workload.Job) [3]string {
	return [3]string{"q=" + j.Queue + ",s=" + ShapeOf(j), "q=" + j.Queue, "*"}
}

// Observe records a completed run of j that took d.
func (h *History) Observe(j *workload.Job, d time.Duration) {
	if d <= 0 {
		return
	}
	// Score what would have been predicted before this run is known.
	if j.ExpectedRuntime > 0 {
		h.score(SourceDeclared, j.ExpectedRuntime, d)
	}
	if est, src := h.learned(j); src != SourceNone {
		h.score(SourceGlobal, est, d)
	}
	if h.keys == nil {
		h.keys = map[string]*window{}
	}
	for _, k := range keysOf(j) {
		w := h.keys[k]
		if w == nil {
			w = &window{}
			h.keys[k] = w
		}
		if len(w.runs) < HistoryWindow {
			w.runs = append(w.runs, d)
		} else {
			w.runs[w.next] = d
			w.next = (w.next + 1) % HistoryWindow
		}
		sorted := append([]time.Duration(nil), w.runs...)
		sort.Slice(sorted, func(a, b int) bool { return sorted[a] < sorted[b] })
		i := int(EstimatePercentile*float64(len(sorted))+0.999999) - 1
		w.p = sorted[max(0, min(i, len(sorted)-1))]
		w.sorted = sorted
	}
}

// learned returns the percentile of the narrowest key with enough samples.
func (h *History) learned(j *workload.Job) (time.Duration, Source) {
	if h == nil || h.keys == nil {
		return 0, SourceNone
	}
	srcs := [3]Source{SourceQueueShape, SourceQueue, SourceGlobal}
	for i, k := range keysOf(j) {
		if w := h.keys[k]; w != nil && len(w.runs) >= MinSamples {
			return w.p, srcs[i]
		}
	}
	return 0, SourceNone
}

// Runtime is how long j is expected to run from its start: the declared
// ExpectedRuntime, else the learned percentile, else MaxRuntime; never more
// than MaxRuntime, which the engine enforces. ok is false when nothing is
// known: such a job is treated as running forever.
func Runtime(h *History, j *workload.Job) (d time.Duration, src Source, ok bool) {
	switch {
	case j.ExpectedRuntime > 0:
		d, src = j.ExpectedRuntime, SourceDeclared
	default:
		d, src = h.learned(j)
	}
	if j.MaxRuntime > 0 && (src == SourceNone || d > j.MaxRuntime) {
		if src == SourceNone {
			src = SourceMax
		}
		d = j.MaxRuntime
	}
	return d, src, src != SourceNone
}
