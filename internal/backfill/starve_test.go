package backfill

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cycle"
)

// TestBackToBack: a streak is the time the spans cover up to now without a
// pause longer than streakGap, starting from a run that is going on or has
// just ended; overlapping runs join it, an old one ends it.
func TestBackToBack(t *testing.T) {
	now := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	span := func(startH, endH float64) cycle.Span {
		at := func(h float64) time.Time { return now.Add(time.Duration(h * float64(time.Hour))) }
		return cycle.Span{Start: at(startH), End: at(endH)}
	}
	cases := map[string]struct {
		spans []cycle.Span
		want  time.Duration
	}{
		"none":                        {},
		"one running for 5 h":         {spans: []cycle.Span{span(-5, 0)}, want: 5 * time.Hour},
		"three in a row":              {spans: []cycle.Span{span(-30, -20), span(-20, -10), span(-10, 0)}, want: 30 * time.Hour},
		"a 10-minute pause continues": {spans: []cycle.Span{span(-20, -10.2), span(-10, 0)}, want: 20 * time.Hour},
		"a 1-hour pause ends it":      {spans: []cycle.Span{span(-20, -11), span(-10, 0)}, want: 10 * time.Hour},
		"overlapping, any order":      {spans: []cycle.Span{span(-3, 0), span(-12, -2), span(-8, -1)}, want: 12 * time.Hour},
		"the last ended 2 h ago":      {spans: []cycle.Span{span(-30, -2)}},
		"just ended counts":           {spans: []cycle.Span{span(-6, -0.1)}, want: 6 * time.Hour},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := backToBack(tc.spans, now); got != tc.want {
				t.Errorf("backToBack = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestSplitBehind: the starved jobs as large as the first keep their place
// (in order), the smaller ones go behind, in order.
func TestSplitBehind(t *testing.T) {
	pending := []cycle.PendingJob{
		{Job: build.Job("a").GPUs(8).Pods(2).Obj()},
		{Job: build.Job("b").GPUs(8).Pods(2).Obj()},
		{Job: build.Job("s").GPUs(8).Obj()},
		{Job: build.Job("t").GPUs(1).Obj()},
	}
	ids := func(idx []int) string {
		var out []string
		for _, i := range idx {
			out = append(out, string(pending[i].Job.ID))
		}
		return strings.Join(out, ",")
	}
	keep, behind := splitBehind(pending, []int{0, 1, 2, 3})
	if ids(keep) != "a,b" || ids(behind) != "s,t" {
		t.Errorf("keep %q behind %q, want a,b and s,t", ids(keep), ids(behind))
	}
}
