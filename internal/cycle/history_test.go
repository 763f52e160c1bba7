package cycle

import (
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/workload"
)

func TestRuntimeEstimate(t *testing.T) {
	mins := func(ms ...int) []time.Duration {
		var out []time.Duration
		for _, m := range ms {
			out = append(out, time.Duration(m)*time.Minute)
		}
		return out
	}
	type obs struct {
		job  *workload.Job
		runs []time.Duration
	}
	q8 := build.Job("x").GPUs(8).Queue("a").Obj()
	q16 := build.Job("x").GPUs(8).Pods(2).Queue("a").Obj()
	other := build.Job("x").GPUs(8).Queue("b").Obj()
	cases := map[string]struct {
		history []obs
		job     *workload.Job
		want    time.Duration
		src     Source
		ok      bool
	}{
		"declared wins": {history: []obs{{q8, mins(1, 1, 1, 1, 1)}},
			job: build.Job("j").GPUs(8).Queue("a").Expected(3 * time.Hour).Obj(), want: 3 * time.Hour, src: SourceDeclared, ok: true},
		"declared is capped by max runtime": {job: build.Job("j").Expected(3 * time.Hour).MaxRuntime(time.Hour).Obj(),
			want: time.Hour, src: SourceDeclared, ok: true},
		"p90 of the same queue and shape": {history: []obs{{q8, mins(10, 20, 30, 40, 50, 60, 70, 80, 90, 100)}},
			job: build.Job("j").GPUs(5).Queue("a").Obj(), want: 90 * time.Minute, src: SourceQueueShape, ok: true},
		"too few of the shape: the queue": {history: []obs{{q8, mins(10, 10, 10)}, {q16, mins(50, 50)}},
			job: build.Job("j").GPUs(8).Queue("a").Obj(), want: 50 * time.Minute, src: SourceQueue, ok: true},
		"too few in the queue: every job": {history: []obs{{q8, mins(10)}, {other, mins(20, 20, 20, 20)}},
			job: build.Job("j").GPUs(8).Queue("a").Obj(), want: 20 * time.Minute, src: SourceGlobal, ok: true},
		"learned estimate capped by max runtime": {history: []obs{{q8, mins(90, 90, 90, 90, 90)}},
			job: build.Job("j").GPUs(8).Queue("a").MaxRuntime(time.Hour).Obj(), want: time.Hour, src: SourceQueueShape, ok: true},
		"nothing but max runtime":        {job: build.Job("j").MaxRuntime(time.Hour).Obj(), want: time.Hour, src: SourceMax, ok: true},
		"nothing known: no estimate":     {job: build.Job("j").Obj()},
		"history too short: no estimate": {history: []obs{{q8, mins(10, 10)}}, job: build.Job("j").GPUs(8).Queue("a").Obj()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var h History
			for _, o := range tc.history {
				for _, d := range o.runs {
					h.Observe(o.job, d)
				}
			}
			got, src, ok := Runtime(&h, tc.job)
			if got != tc.want || src != tc.src || ok != tc.ok {
				t.Errorf("Runtime = %v, %q, %v; want %v, %q, %v", got, src, ok, tc.want, tc.src, tc.ok)
			}
		})
	}
}

func TestHistoryWindowForgetsOldRuns(t *testing.T) {
	var h History
	j := build.Job("x").Obj()
	for i := 0; i < HistoryWindow; i++ {
		h.Observe(j, 10*time.Hour)
	}
	for i := 0; i < HistoryWindow; i++ {
		h.Observe(j, time.Minute)
	}
	if got, _, _ := Runtime(&h, j); got != time.Minute {
		t.Errorf("estimate %v after the window turned over, want 1m0s", got)
	}
	var nilH *History
	if _, _, ok := Runtime(nilH, j); ok {
		t.Errorf("a nil history gave an estimate")
	}
}

// TestHistorySpans: the history keeps the latest spansPerSize spans of each
// GPU size, lists those of runs at least as large as asked, by end, and
// learns runs without a span all the same.
func TestHistorySpans(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var h History
	run := func(milli int64, endH int) Run {
		end := t0.Add(time.Duration(endH) * time.Hour)
		return Run{Shape: "x", Took: time.Hour, Span: Span{Start: end.Add(-time.Hour), End: end, GPUMilli: milli}}
	}
	for i := range spansPerSize + 10 {
		h.ObserveRun(run(16000, i))
	}
	h.ObserveRun(run(8000, 5))
	h.ObserveRun(Run{Shape: "x", Took: time.Hour}) // no span
	if got := h.Runs(); got != spansPerSize+12 {
		t.Errorf("runs %d, want %d", got, spansPerSize+12)
	}
	big := h.Spans(16000)
	if len(big) != spansPerSize {
		t.Fatalf("%d spans of 16 GPUs, want the latest %d", len(big), spansPerSize)
	}
	if first := big[0].End.Sub(t0); first != 10*time.Hour {
		t.Errorf("oldest kept span ends at %s, want 10h", first)
	}
	all := h.Spans(8000)
	if len(all) != spansPerSize+1 || all[0].GPUMilli != 8000 {
		t.Errorf("spans of at least 8 GPUs: %d, first %+v; want %d, the 8-GPU one first (ends earliest)", len(all), all[0], spansPerSize+1)
	}
	var nilHist *History
	if nilHist.Spans(0) != nil {
		t.Error("a nil history has spans")
	}
}
