package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/build"
)

// TestUnknownPreferredLevelIsAWarning: a preferred level the cluster lacks
// is ignored with a warning, the job placed; an unknown required level is
// still a never-fits.
func TestUnknownPreferredLevelIsAWarning(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Node().Name("n").Times(2))
	pref := build.Job("pref").Pods(2).GPUs(8).Preferred("rak").Obj()
	req := build.Job("req").Pods(1).GPUs(1).Required("rak").Obj()
	plan := New(Config{}).Cycle(&Snapshot{State: s, Pending: []PendingJob{{Job: pref}, {Job: req}}})
	if o := outcomeOf(plan, "pref"); !o.Placed {
		t.Errorf("pref: %+v, want placed", o)
	}
	if o := outcomeOf(plan, "req"); o.Verdict.String() != "NeverFits" {
		t.Errorf("req: %+v, want never fits", o)
	}
	want := []Warning{{Job: "pref", Message: `preferred level "rak" is not a level of the cluster (levels: cluster, rack, host); ignored`}}
	if diff := cmp.Diff(want, plan.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}
