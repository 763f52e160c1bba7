package backfill

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cycle"
)

// TestBehindBacklog: a starved job is behind a backlog when the strictly
// larger starved jobs ahead of it would hold a 16-GPU cluster for more than
// the bound (24 h) served back to back; equally large ones do not count, nor
// jobs without a runtime estimate.
func TestBehindBacklog(t *testing.T) {
	job := func(id string, gpus int, runtime time.Duration) cycle.PendingJob {
		b := build.Job(id).GPUs(gpus)
		if runtime > 0 {
			b = b.Expected(runtime)
		}
		return cycle.PendingJob{Job: b.Obj()}
	}
	cases := map[string]struct {
		jobs       []cycle.PendingJob // in starvedOrder
		wantBehind string
	}{
		"25 h of whole-cluster jobs ahead": {jobs: []cycle.PendingJob{
			job("a", 16, 20*time.Hour), job("b", 16, 5*time.Hour), job("s", 8, time.Hour), job("t", 1, time.Hour)},
			wantBehind: "s,t"},
		"20 h ahead: none": {jobs: []cycle.PendingJob{
			job("a", 16, 10*time.Hour), job("b", 16, 10*time.Hour), job("s", 8, time.Hour)}},
		"half-cluster jobs count half": {jobs: []cycle.PendingJob{
			job("a", 8, 30*time.Hour), job("b", 8, 30*time.Hour), job("s", 1, time.Hour)},
			wantBehind: "s"},
		"30 h of 8-GPU jobs ahead count 15 h": {jobs: []cycle.PendingJob{
			job("a", 8, 30*time.Hour), job("s", 1, time.Hour)}},
		"equally large ones do not count": {jobs: []cycle.PendingJob{
			job("a", 16, 30*time.Hour), job("b", 16, time.Hour)}},
		"no estimate adds nothing": {jobs: []cycle.PendingJob{
			job("a", 16, 0), job("b", 16, 0), job("s", 8, time.Hour)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			starved := make([]int, len(tc.jobs))
			for i := range starved {
				starved[i] = i
			}
			keep, behind := behindBacklog(nil, tc.jobs, starved, 16000, 24*time.Hour)
			ids := func(idx []int) string {
				var out []string
				for _, i := range idx {
					out = append(out, string(tc.jobs[i].Job.ID))
				}
				return strings.Join(out, ",")
			}
			if got := ids(behind); got != tc.wantBehind {
				t.Errorf("behind %q, want %q", got, tc.wantBehind)
			}
			if len(keep)+len(behind) != len(tc.jobs) {
				t.Errorf("keep %s + behind %s lose jobs", fmt.Sprint(keep), fmt.Sprint(behind))
			}
		})
	}
}
