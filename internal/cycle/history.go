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
	// MinSamples is how many completed runs a queue or global key needs
	// before its percentile is trusted; below it the estimate falls back to
	// a wider key.
	MinSamples = 5
	// MinUserSamples is the same for a user's keys. A user's jobs resemble
	// each other more than a queue's do (Tsafrir, Etsion and Feitelson
	// predict from a user's last two), so fewer runs say enough.
	MinUserSamples = 5
	// HistoryWindow is how many recent runtimes each key keeps.
	HistoryWindow = 200
)

// Source says where a runtime estimate came from.
type Source string

const (
	SourceNone       Source = ""            // no estimate: treated as never ending
	SourceDeclared   Source = "declared"    // the job's ExpectedRuntime
	SourceUserShape  Source = "user+shape"  // p90 of the same user and size
	SourceUser       Source = "user"        // p90 of the same user
	SourceQueueShape Source = "queue+shape" // p90 of the same queue and size
	SourceQueue      Source = "queue"       // p90 of the same queue
	SourceGlobal     Source = "global"      // p90 of every job
	SourceMax        Source = "max-runtime" // only MaxRuntime was known
)

// History is the runtimes of completed jobs, by user, queue and shape. The driver
// owns it (Observe after each completion) and hands it to the engine in the
// snapshot; the engine only reads it. The zero value is empty and usable.
type History struct {
	keys map[keyName]*window
	// acc scores each kind of estimate (declared, learned) against the
	// runtimes that came true: what Confidence reports.
	acc map[Source]*scores
	// runs counts the completed runs observed.
	runs int
	// spans are the latest spans of each GPU size (milli), in the order
	// they were observed.
	spans map[int64][]Span
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
	learned := src.Learned()
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

// Learned is whether src is a percentile of completed runs (of any key).
func (src Source) Learned() bool {
	switch src {
	case SourceUserShape, SourceUser, SourceQueueShape, SourceQueue, SourceGlobal:
		return true
	}
	return false
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
	keys, n := keysOf(j)
	for _, k := range keys[:n] {
		w := h.keys[k.name]
		if w == nil {
			continue
		}
		i := sort.Search(len(w.sorted), func(i int) bool { return w.sorted[i] > elapsed })
		longer := w.sorted[i:]
		if len(longer) < k.min {
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

// histKey is one key runtimes are kept under (its name in History.keys)
// and the runs it needs before its percentile is trusted.
type histKey struct {
	name keyName
	min  int
}

// keyName identifies a key's runs: its kind (the Source an estimate from
// it reports) and whose they are (a user, a
// queue), with the shape for the narrow kinds. A struct, not a joined
// string, so that no user or queue name can pass for another key.
type keyName struct {
	src        Source
	who, shape string
}

// keysOf is j's keys, narrowest first (keysOfRun).
func keysOf(j *workload.Job) (keys [5]histKey, n int) {
	return keysOfRun(j.User, j.Queue, ShapeOf(j))
}

// keysOfRun is the keys of a job of this user, queue and shape, narrowest
// first: its user's (when the user is known) and shape, its user's, its
// queue's and shape, its queue's, every job's. The user keys are not per
// queue: one user's jobs in two queues are still one user's.
func keysOfRun(user, queue, shape string) (keys [5]histKey, n int) {
	if user != "" {
		keys[n] = histKey{keyName{SourceUserShape, user, shape}, MinUserSamples}
		keys[n+1] = histKey{keyName{SourceUser, user, ""}, MinUserSamples}
		n += 2
	}
	keys[n] = histKey{keyName{SourceQueueShape, queue, shape}, MinSamples}
	keys[n+1] = histKey{keyName{SourceQueue, queue, ""}, MinSamples}
	keys[n+2] = histKey{keyName{SourceGlobal, "", ""}, MinSamples}
	return keys, n + 3
}

// Run is one completed run as the history learns it: whose it was, its
// size bucket, what it declared and how long it took. A driver that keeps
// the history across restarts stores these and replays them (ObserveRun).
type Run struct {
	User, Queue string
	Shape       string        // ShapeOf the job
	Declared    time.Duration // the job's ExpectedRuntime; zero if none
	Took        time.Duration
	// Span is when the run held its GPUs; zero when the driver does not
	// say (the runtime is learned all the same).
	Span Span
}

// Span is when a completed run held its GPUs, how many and how long it
// had waited for them: what the engine knows of the recent past beyond
// runtimes (which jobs held the cluster in a row, History.Spans).
type Span struct {
	Start, End time.Time
	GPUMilli   int64
	Waited     time.Duration
}

// spansPerSize is how many recent spans the history keeps for each GPU
// size: enough to cover days of back-to-back runs of the largest jobs.
const spansPerSize = 64

// SpanOf is the span of a run of job j that held its GPUs from start to
// end: its wait counts from the job's submission (zero when the driver
// knows none).
func SpanOf(j *workload.Job, start, end time.Time) Span {
	sp := Span{Start: start, End: end, GPUMilli: j.GPUMilli()}
	if !j.Submit.IsZero() {
		sp.Waited = max(start.Sub(j.Submit), 0)
	}
	return sp
}

// RunOf is the Run of job j that took d.
func RunOf(j *workload.Job, d time.Duration) Run {
	return Run{User: j.User, Queue: j.Queue, Shape: ShapeOf(j), Declared: j.ExpectedRuntime, Took: d}
}

// Observe records a completed run of j that took d.
func (h *History) Observe(j *workload.Job, d time.Duration) { h.ObserveRun(RunOf(j, d)) }

// ObserveRun records a completed run. Replaying a driver's stored runs in
// the order they completed rebuilds the history they were learned into.
func (h *History) ObserveRun(r Run) {
	d := r.Took
	if d <= 0 {
		return
	}
	keys, n := keysOfRun(r.User, r.Queue, r.Shape)
	// Score what would have been predicted before this run is known.
	if r.Declared > 0 {
		h.score(SourceDeclared, r.Declared, d)
	}
	if est, src := h.learnedFrom(keys[:n]); src != SourceNone {
		h.score(SourceGlobal, est, d)
	}
	if h.keys == nil {
		h.keys = map[keyName]*window{}
	}
	for _, k := range keys[:n] {
		w := h.keys[k.name]
		if w == nil {
			w = &window{}
			h.keys[k.name] = w
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
	h.runs++
	if sp := r.Span; !sp.End.IsZero() && sp.GPUMilli > 0 {
		if h.spans == nil {
			h.spans = map[int64][]Span{}
		}
		l := append(h.spans[sp.GPUMilli], sp)
		if len(l) > spansPerSize {
			l = append(l[:0:0], l[len(l)-spansPerSize:]...)
		}
		h.spans[sp.GPUMilli] = l
	}
}

// Spans lists the kept spans of runs of at least minMilli GPU-milli, by
// end (then start, then size).
func (h *History) Spans(minMilli int64) []Span {
	if h == nil {
		return nil
	}
	var out []Span
	for m, l := range h.spans {
		if m >= minMilli {
			out = append(out, l...)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		x, y := out[a], out[b]
		if !x.End.Equal(y.End) {
			return x.End.Before(y.End)
		}
		if !x.Start.Equal(y.Start) {
			return x.Start.Before(y.Start)
		}
		if x.GPUMilli != y.GPUMilli {
			return x.GPUMilli < y.GPUMilli
		}
		return x.Waited < y.Waited
	})
	return out
}

// Runs is how many completed runs the history has learned from.
func (h *History) Runs() int {
	if h == nil {
		return 0
	}
	return h.runs
}

// learned returns the percentile of the narrowest key with enough samples.
func (h *History) learned(j *workload.Job) (time.Duration, Source) {
	keys, n := keysOf(j)
	return h.learnedFrom(keys[:n])
}

func (h *History) learnedFrom(keys []histKey) (time.Duration, Source) {
	if h == nil || h.keys == nil {
		return 0, SourceNone
	}
	for _, k := range keys {
		if w := h.keys[k.name]; w != nil && len(w.runs) >= k.min {
			return w.p, k.name.src
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
