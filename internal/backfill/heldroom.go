package backfill

import (
	"time"

	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/workload"
)

// HeldRoom is how long blocked job j (gang g) waits for room that backfill
// holds for it: its reservation's start, or the start of the reservation
// Blocked would give it this cycle. ok is false when no reservation would
// hold the room (the caps are spent, e.g. its queue's one reservation went
// to another job; the estimate is too weak; holding is not worth it; not
// EASY): the room backfill's replay sees free then goes to whichever job
// fits first. With queues, priority preemption weighs its victims' loss
// against this wait only (preempt.WorthEvicting): on the queues workload
// (gen:llm tuning seed 42) a 16-GPU job refused three times to evict 3
// GPU-hours for room promised within minutes; jobs placed after it took
// that room and it evicted 5.5 GPU-hours ten minutes later.
func (b *Cycle) HeldRoom(j *workload.Job, g placement.Gang) (wait time.Duration, ok bool) {
	s := b.l.Snapshot()
	if i := b.reservationOf(j.ID); i >= 0 {
		return max(0, b.res[i].slot.Start.Sub(s.Now)), true
	}
	if b.mode != EASY || b.capsSpent(j) {
		return 0, false
	}
	b.l.RetakeHolds()
	slot, found := Earliest(b.l.View(), b.l.Holders(), g, s.Now, s.Runtimes, b.holds.Closed)
	if !found || b.refusesHold(j, slot) != holdOK {
		return 0, false
	}
	return max(0, slot.Start.Sub(s.Now)), true
}
