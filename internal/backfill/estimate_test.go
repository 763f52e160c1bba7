package backfill

import (
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cycle"
)

// TestExpectExtendsOutlivedEstimates: a job running past its estimate is
// given a longer one (from the longer runs of its kind, else twice its
// elapsed time) at half the confidence, never past its max runtime.
func TestExpectExtendsOutlivedEstimates(t *testing.T) {
	now := time.Unix(0, 0).UTC().Add(100 * time.Hour)
	var hist History
	learnedJob := build.Job("l").GPUs(8).Queue("h").Obj()
	for i := 1; i <= 20; i++ {
		hist.Observe(learnedJob, time.Duration(i)*time.Hour)
	}
	cases := map[string]struct {
		job          *build.JobBuilder
		learned      bool // with the history of 1..20 h runs
		ran          time.Duration
		want         time.Duration
		wantExtended bool
	}{
		"within its estimate":                     {job: build.Job("j").Expected(2 * time.Hour), ran: time.Hour, want: 2 * time.Hour},
		"outlived, nothing longer known: doubled": {job: build.Job("j").Expected(time.Hour), ran: 3 * time.Hour, want: 6 * time.Hour, wantExtended: true},
		"outlived, capped by max runtime":         {job: build.Job("j").Expected(time.Hour).MaxRuntime(4 * time.Hour), ran: 3 * time.Hour, want: 4 * time.Hour, wantExtended: true},
		"outlived, the longer runs of its kind":   {job: build.Job("l").GPUs(8).Queue("h").Expected(time.Hour), learned: true, ran: 14 * time.Hour, want: 20 * time.Hour, wantExtended: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := tc.job.Obj()
			h := &History{}
			if tc.learned {
				h = &hist
			}
			first, _, _ := cycle.Runtime(h, j)
			e, ok := Expect(h, j, now.Add(-tc.ran), now)
			if !ok || e.Runtime != tc.want || e.Extended != tc.wantExtended {
				t.Fatalf("Expect = %+v, %v; want %v extended %v", e, ok, tc.want, tc.wantExtended)
			}
			if c := h.Confidence(e.Src); tc.wantExtended && e.Conf != c/2 {
				t.Errorf("extended confidence %v, want half of %v", e.Conf, c)
			}
			if e.Runtime < first {
				t.Errorf("extended to %v, below the first estimate %v", e.Runtime, first)
			}
		})
	}
}
