package backfill

import (
	"fmt"
	"sort"
	"time"

	"github.com/corral-dev/corral/internal/cycle"
)

// MaxRuntimeAction is what happens to a job past its max runtime.
type MaxRuntimeAction string

const (
	// Terminate stops the job for good (Eviction.Terminal): it had its
	// declared time, as a batch system's time limit works.
	Terminate MaxRuntimeAction = "Terminate"
	// Requeue evicts the job back to pending; it restarts from its last
	// checkpoint and its max runtime counts again from the new start.
	Requeue MaxRuntimeAction = "Requeue"
)

// Overrun is a running job past its max runtime and the eviction that
// stops it.
type Overrun struct {
	Running  cycle.RunningJob
	Eviction cycle.Eviction
}

// PastMaxRuntime lists the running jobs (with pods) that have run at least
// their declared max runtime by now, in job id order, each with its
// eviction: terminal under Terminate (the default for ""), a requeue under
// Requeue. A terminal eviction loses nothing (the job is not run again); a
// requeue's lost work is left for the caller to price with the restart-cost
// model.
func PastMaxRuntime(running []cycle.RunningJob, now time.Time, action MaxRuntimeAction) []Overrun {
	sorted := append([]cycle.RunningJob(nil), running...)
	sort.Slice(sorted, func(a, c int) bool { return sorted[a].Job.ID < sorted[c].Job.ID })
	var out []Overrun
	for _, rj := range sorted {
		maxRun := rj.Job.MaxRuntime
		var ran time.Duration
		if now.After(rj.Start) {
			ran = now.Sub(rj.Start)
		}
		if maxRun <= 0 || ran < maxRun || len(rj.Pods) == 0 {
			continue
		}
		ev := cycle.Eviction{Job: rj.Job.ID, Cause: cycle.CauseMaxRuntime}
		for _, p := range rj.Pods {
			ev.Pods = append(ev.Pods, p.Pod)
		}
		what := "terminated"
		if action == Requeue {
			what = "requeued from its last checkpoint"
		} else {
			ev.Terminal = true
		}
		ev.Message = fmt.Sprintf("ran %s, past its max runtime %s: %s", ran.Round(time.Second), maxRun, what)
		out = append(out, Overrun{Running: rj, Eviction: ev})
	}
	return out
}
