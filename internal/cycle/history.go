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
}

type window struct {
	runs []time.Duration // ring of the last HistoryWindow runtimes
	next int
	p    time.Duration // the percentile of runs, kept current by Observe
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
