package cycle

import (
	"math"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
)

// TestConfidenceScoresEstimatesAgainstRuns: each completed run scores the
// declared and the learned estimate it would have had; before MinSamples
// scores a declared runtime is taken at its word and a learned one is not.
func TestConfidenceScoresEstimatesAgainstRuns(t *testing.T) {
	cases := map[string]struct {
		declared time.Duration // of each run of an hour; 0: none
		runs     int
		src      Source
		want     float64
	}{
		"nothing scored: declared is believed": {src: SourceDeclared, want: 1},
		"nothing scored: learned is not":       {src: SourceQueueShape, want: 0},
		"exact declarations score 1":           {declared: time.Hour, runs: 10, src: SourceDeclared, want: 1},
		"twice the runtime scores 0.5":         {declared: 2 * time.Hour, runs: 10, src: SourceDeclared, want: 0.5},
		// The first MinSamples runs teach the history, the next are scored
		// against a percentile of identical runs.
		"identical runs: learned scores 1": {runs: 2*MinSamples + 1, src: SourceQueue, want: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var h History
			j := build.Job("j").GPUs(8).Queue("a").Expected(tc.declared).Obj()
			for i := 0; i < tc.runs; i++ {
				h.Observe(j, time.Hour)
			}
			if got := h.Confidence(tc.src); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("Confidence(%q) = %v, want %v", tc.src, got, tc.want)
			}
		})
	}
}

// TestOutlivedIsTheConditionalPercentile: a job that ran past its estimate
// is estimated from the runs longer than it has run, not from all of them.
func TestOutlivedIsTheConditionalPercentile(t *testing.T) {
	var h History
	j := build.Job("j").GPUs(8).Queue("a").Obj()
	for i := 1; i <= 20; i++ {
		h.Observe(j, time.Duration(i)*time.Hour) // 1 h ... 20 h
	}
	if d, _, _ := Runtime(&h, j); d != 18*time.Hour {
		t.Fatalf("p90 of 1..20 h = %v, want 18h", d)
	}
	// Runs longer than 14 h: 15..20 h; their p90 is 20 h.
	if d, ok := h.Outlived(j, 14*time.Hour); !ok || d != 20*time.Hour {
		t.Errorf("Outlived(14h) = %v, %v; want 20h, true", d, ok)
	}
	// Only two runs longer than 18 h: too few to say.
	if d, ok := h.Outlived(j, 18*time.Hour); ok {
		t.Errorf("Outlived(18h) = %v, true; want too few runs", d)
	}
}
