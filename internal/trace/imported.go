package trace

import (
	"sort"
	"time"

	"github.com/corral-dev/corral/internal/workload"
)

// importedRow is one job read from another system's history (sacct,
// Philly), with its submit time on that system's clock.
type importedRow struct {
	job     *workload.Job
	submit  time.Time
	runtime time.Duration
	line    int
}

// importedTrace moves the rows onto the trace clock (the first submit at
// Epoch), checks each job and orders them by submit. With submitField set,
// a submit further than the trace limit from the first is an error naming
// that field.
func importedTrace(name string, rows []importedRow, submitField string) (*Trace, error) {
	first := rows[0].submit
	for _, r := range rows {
		if r.submit.Before(first) {
			first = r.submit
		}
	}
	t := &Trace{Name: name}
	for _, r := range rows {
		since := r.submit.Sub(first)
		if submitField != "" && since > time.Duration(defaultLimits.seconds)*time.Second {
			return nil, errorf(name, r.line, submitField, "%ss after the first submit is above the limit of %ds", secondsText(since), defaultLimits.seconds)
		}
		r.job.Submit = Epoch.Add(since)
		if err := checkJob(r.job, name, r.line); err != nil {
			return nil, err
		}
		t.Jobs = append(t.Jobs, Job{Job: r.job, Runtime: r.runtime, Line: r.line})
	}
	sort.SliceStable(t.Jobs, func(a, b int) bool { return t.Jobs[a].Submit.Before(t.Jobs[b].Submit) })
	return t, nil
}
