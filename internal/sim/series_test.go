package sim

import (
	"testing"

	"github.com/corral-dev/corral/internal/engine"
)

// TestReportSeries: a replay records jobs waiting and allocation per rack
// at every sample, in step with utilization.
func TestReportSeries(t *testing.T) {
	res, _, err := Run(gangWorkload(), Config{Policy: engine.Corral, Protocol: Replay, Seed: 1, Clock: fakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Series
	if len(s.Pending) != len(s.Utilization) || len(s.Pending) == 0 {
		t.Fatalf("%d pending samples, %d utilization samples", len(s.Pending), len(s.Utilization))
	}
	// Allocated is sampled with useful work and never below it.
	if len(s.Allocated) != len(s.Utilization) {
		t.Fatalf("%d allocated samples, %d utilization samples", len(s.Allocated), len(s.Utilization))
	}
	for i, a := range s.Allocated {
		if u := s.Utilization[i]; a.X != u.X || a.Y < u.Y {
			t.Fatalf("sample %d: allocated %+v, useful %+v: want the same time and allocated >= useful", i, a, u)
		}
	}
	maxPending := 0.0
	for _, p := range s.Pending {
		maxPending = max(maxPending, p.Y)
	}
	if maxPending == 0 || s.Pending[len(s.Pending)-1].Y != 0 {
		t.Errorf("pending peaked at %.0f and ended at %.0f: want some wait, none at the end", maxPending, s.Pending[len(s.Pending)-1].Y)
	}
	d := s.Domains
	if d == nil || d.Level != "rack" || len(d.Names) != 2 || len(d.Hours) != len(s.Pending) || len(d.Alloc[0]) != 2 {
		t.Fatalf("domain series %+v", d)
	}
	busy := false
	for _, row := range d.Alloc {
		for _, v := range row {
			if v < 0 || v > 100 {
				t.Fatalf("allocation %.1f%% out of range", v)
			}
			busy = busy || v > 50
		}
	}
	if !busy {
		t.Error("no rack was ever more than half allocated")
	}
	if s.QueueGPUs != nil {
		t.Errorf("queue series without queues: %v", s.QueueGPUs)
	}
}
