package preempt

import (
	"fmt"
	"time"

	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/workload"
)

// Kind is why a running job may be evicted for a waiting one.
type Kind uint8

const (
	// NotAllowed: the running job stays.
	NotAllowed Kind = iota
	// ByPriority: same queue (or no queues), strictly lower priority.
	ByPriority
	// ByReclaim: another queue, and the waiting job's queue is owed its
	// guarantee by a queue holding more than its own.
	ByReclaim
	// ByFairShare: another queue above its fair share, and the waiting
	// job's queue, past its guarantee with the job, would stay below it:
	// spare capacity rebalanced. Such a reclaim spares jobs that reported
	// no checkpoint in their run (SparedFromFairShare).
	ByFairShare
)

// Standing is a job's side of the eligibility rules: its leaf queue and the
// queue's standing now. Without queues every field but Priority is empty.
type Standing struct {
	Queue    string
	Priority int32
	// Usage, Guarantee and Fair are the leaf queue's, now.
	Usage, Guarantee, Fair cycle.Amounts
	// Reclaim: the queue (or an ancestor) may preempt other queues.
	Reclaim bool
	// Strict: its reclaim may also take a borrowing job whose eviction
	// leaves the job's queue below its own guarantee, when no set of victims
	// gives the guarantee back otherwise (reclaimPolicy Strict).
	Strict bool
}

// Protected says why a running job may never be evicted now ("" if it may).
func Protected(j *workload.Job, ranFor time.Duration) string {
	if !j.Preemptible {
		return "not preemptible"
	}
	if j.MinRuntime > 0 && ranFor < j.MinRuntime {
		return fmt.Sprintf("inside its minimum runtime (%s of %s)", ranFor.Truncate(time.Second), j.MinRuntime)
	}
	return ""
}

// Eligible applies the rules to a waiting job p (which would charge its
// queue charge) and a running job v (which holds held):
//
//   - same queue: v's priority is strictly below p's;
//   - another queue, only when p's queue may reclaim, either
//     (guarantee, ByReclaim) p's queue stays within its guarantee on every
//     guaranteed resource the job uses, and v's queue uses more than its
//     guarantee of a resource p's queue is owed (one p has a guarantee of:
//     a queue using CPU nobody guarantees borrows nothing p may take back);
//     or
//     (fair share, ByFairShare) v's queue is above its fair share (dominant
//     share > 1) and p's queue, with the job, stays strictly below v's
//     queue's dominant share now, so the move cannot be undone by a move
//     back.
//
// Priority does not count across queues: a guarantee is owed whatever the
// borrower's priority.
func Eligible(p Standing, charge cycle.Amounts, v Standing) Kind {
	if p.Queue == v.Queue {
		if v.Priority < p.Priority {
			return ByPriority
		}
		return NotAllowed
	}
	if !p.Reclaim {
		return NotAllowed
	}
	after := cycle.Amounts{}
	for r, x := range p.Usage {
		after[r] = x
	}
	for r, x := range charge {
		after[r] += x
	}
	if owedGuarantee(p, charge, after) {
		for _, r := range charge.Resources() {
			if charge[r] > 0 && p.Guarantee[r] > 0 && v.Usage[r] > v.Guarantee[r] {
				return ByReclaim
			}
		}
	}
	vShare := cycle.DominantShare(v.Usage, v.Fair)
	if vShare > 1 && cycle.DominantShare(after, p.Fair) < vShare {
		return ByFairShare
	}
	return NotAllowed
}

// Reclaims says whether k is one of the two reclaim kinds (an eviction
// across queues).
func (k Kind) Reclaims() bool { return k == ByReclaim || k == ByFairShare }

// SparedFromFairShare says a running job is left alone by a fair-share
// reclaim (corral's LeastLost only): it reported no checkpoint in its
// current run, so an eviction would throw away everything since its start,
// and after each restart again. Rebalancing capacity nobody is guaranteed
// is not worth that; a guarantee reclaim still takes the job. Measured in
// docs/preemption.md (issue 17): on the queues workload with the
// generator's checkpoint mix, fair-share reclaims were a third of the
// GPU-hours lost to preemption.
func SparedFromFairShare(rj cycle.RunningJob, now time.Time) bool {
	return !reportedInRun(rj, now)
}

// Reclaim spares a borrower that would lose much of its progress, for a
// while (corral's LeastLost only): one that has run longer than a bound
// since its last reported checkpoint (plus the restart overhead it would
// pay again) is left out of reclaim until the job reclaiming has waited
// the grace since it was submitted. Other borrowers are taken first; when
// none will do, the owner waits for room to free on its own, at most the
// grace. Hours of progress rather than GPU-hours, so that a big gang that
// checkpoints is not spared for its size alone. On the queues workload
// with the generator's checkpoint mix (docs/benchmarks.md, issue 17), most
// of the work reclaim threw away was a few single-node jobs evicted days
// into a run without a checkpoint.
const (
	DefaultReclaimMaxLost = 6 * time.Hour
	DefaultReclaimGrace   = 24 * time.Hour
)

// SparedFromReclaim says whether reclaim leaves a borrower alone for now:
// it would lose lost of progress (since its last checkpoint, plus the
// restart overhead), more than maxLost (not positive: never spared), and
// the job reclaiming has waited less than the grace.
func SparedFromReclaim(lost, waited, maxLost, grace time.Duration) bool {
	return maxLost > 0 && lost > maxLost && waited < grace
}

// LostProgress is how much of its progress a restart of the job throws
// away now: the time since its last checkpoint (since its start when it
// reported none) plus the restart overhead.
func LostProgress(rj cycle.RunningJob, now time.Time) time.Duration {
	return max(now.Sub(LastCheckpoint(rj, now)), 0) + rj.Job.RestartOverhead
}

// Keeps checks what a whole set of reclaim victims takes from one queue v
// (removed, summed over the set), so that reclaim does not set off more
// reclaim: after the evictions v must keep at least its guarantee on every
// resource the waiting job uses (when p reclaims a guarantee), or at least
// its fair share, with a dominant share no lower than p's queue will have
// with the job (fair share). A queue reclaim took from is thus never owed
// anything, and the two sides only move toward each other, never past.
func Keeps(p Standing, charge cycle.Amounts, v Standing, removed cycle.Amounts) bool {
	vAfter := cycle.Amounts{}
	for r, x := range v.Usage {
		vAfter[r] = x
	}
	for r, x := range removed {
		vAfter[r] -= x
	}
	pAfter := cycle.Amounts{}
	for r, x := range p.Usage {
		pAfter[r] = x
	}
	for r, x := range charge {
		pAfter[r] += x
	}
	keepsGuarantee := true
	for _, r := range charge.Resources() {
		if charge[r] > 0 && vAfter[r] < v.Guarantee[r] {
			keepsGuarantee = false
		}
	}
	if keepsGuarantee && owedGuarantee(p, charge, pAfter) {
		return true
	}
	vShare := cycle.DominantShare(vAfter, v.Fair)
	return vShare >= 1 && cycle.DominantShare(pAfter, p.Fair) <= vShare
}

// NoTakeBack says a guarantee reclaim by p (charging charge) that leaves
// v's queue below its own guarantee cannot be undone: with the job, p's
// queue stays within its guarantee of every resource v is guaranteed and the
// job uses, so v's queue, owed now, has nothing of p's to reclaim. Strict
// reclaim asks it of every queue it takes below its guarantee; where
// queues guarantee the same resources it always holds.
func NoTakeBack(p Standing, charge cycle.Amounts, v Standing) bool {
	for _, r := range charge.Resources() {
		if charge[r] > 0 && v.Guarantee[r] > 0 && p.Usage[r]+charge[r] > p.Guarantee[r] {
			return false
		}
	}
	return true
}

// owedGuarantee: the job keeps p's queue within its guarantee on every
// guaranteed resource it uses, and uses at least one.
func owedGuarantee(p Standing, charge, after cycle.Amounts) bool {
	owed := false
	for _, r := range charge.Resources() {
		g := p.Guarantee[r]
		if g <= 0 || charge[r] <= 0 {
			continue
		}
		if after[r] > g {
			return false
		}
		owed = true
	}
	return owed
}
