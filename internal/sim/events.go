package sim

import (
	"container/heap"
	"time"
)

type eventKind uint8

const (
	evFinish eventKind = iota // finishes first at equal times: capacity before demand
	evArrive
	// evWake runs a cycle when a job reaches its max runtime, so that the
	// engine can stop it then and not at the next arrival.
	evWake
	evRetry // the engine asked to look again (Plan.Retry)
	// evRecycle runs one more cycle at the same time.
	evRecycle
	evRepair // a failed device or node comes back
	evFail   // the failure process: something fails, the next failure is drawn
	// evDetect runs a cycle when the scheduler learns of a node failure.
	evDetect
	// evRendezvous fails a job whose pods have not all started within the
	// rendezvous timeout.
	evRendezvous
	// evMIGReady brings a re-partitioned MIG GPU back into service.
	evMIGReady
)

type event struct {
	at   time.Time
	kind eventKind
	job  int // index into the run's jobs
	seq  int // insertion order: the final tie-break
	// epoch is the job's run the event belongs to: a finish scheduled
	// before an eviction is stale once the job has been evicted.
	epoch int
	// node and dev name what a repair brings back (dev -1: the node).
	node, dev int
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }

func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	if q[i].kind != q[j].kind {
		return q[i].kind < q[j].kind
	}
	return q[i].seq < q[j].seq
}

func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }

func (q *eventQueue) Push(x any) { *q = append(*q, x.(event)) }

func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

func (r *replay) push(at time.Time, kind eventKind, job int) {
	heap.Push(&r.events, event{at: at, kind: kind, job: job, seq: r.seq, epoch: r.jobs[job].epoch})
	r.seq++
}

// pushAt pushes an event that names a device (node, dev) besides a job.
func (r *replay) pushAt(at time.Time, kind eventKind, job, node, dev int) {
	heap.Push(&r.events, event{at: at, kind: kind, job: job, seq: r.seq, epoch: r.jobs[job].epoch, node: node, dev: dev})
	r.seq++
}
