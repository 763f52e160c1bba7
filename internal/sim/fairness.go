package sim

import (
	"sort"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/metrics"
)

// fairness measures how the queues fared in a replay: Jain's index of
// allocation / fair share over time, and how long the queue that became
// active last took to reach its share. Nil (no queues) measures nothing.
type fairness struct {
	queues []cycle.QueueSpec
	leaves map[string]bool
	jain   float64 // now, until the next event
	area   float64 // jain × seconds
	// reported: the scheduler ever reported queue standings.
	reported bool

	late      string
	lateStart time.Time
	// The late queue's shortages: since when it is short (zero: it is not),
	// how many ended and how long they lasted, the first one's length.
	shortSince time.Time
	shortages  int
	shortTotal time.Duration
	first      time.Duration
	ended      bool // the first shortage ended
}

// shareReached is the part of its fair share a queue must hold to count as
// having reached it: allocation moves in whole gangs, so exactly 100% may
// never happen.
const shareReached = 0.95

func newFairness(queues []cycle.QueueSpec, jobs []Job) *fairness {
	if len(queues) == 0 {
		return nil
	}
	f := &fairness{queues: queues, leaves: map[string]bool{}, jain: 1}
	for _, l := range engine.QueueLeaves(queues) {
		f.leaves[l] = true
	}
	first := map[string]time.Time{}
	for _, j := range jobs {
		if t, ok := first[j.Queue]; !ok || j.Submit.Before(t) {
			first[j.Queue] = j.Submit
		}
	}
	names := make([]string, 0, len(first))
	for q := range first {
		if f.leaves[q] {
			names = append(names, q)
		}
	}
	sort.Strings(names)
	if len(names) > 1 {
		for _, q := range names {
			if f.late == "" || first[q].After(f.lateStart) {
				f.late, f.lateStart = q, first[q]
			}
		}
	}
	return f
}

func (f *fairness) specs() []cycle.QueueSpec {
	if f == nil {
		return nil
	}
	return f.queues
}

func (f *fairness) advance(seconds float64) {
	if f != nil {
		f.area += f.jain * seconds
	}
}

func (f *fairness) satisfied(now time.Time) {
	if f != nil {
		f.jain = 1
		if f.late != "" && !now.Before(f.lateStart) {
			f.track(now, false)
		}
	}
}

// observe reads the queues' standing after a cycle.
func (f *fairness) observe(qs []engine.QueueStatus, now time.Time) {
	if f == nil {
		return
	}
	if len(qs) > 0 {
		f.reported = true
	}
	var sum, sq float64
	n := 0
	for _, q := range qs {
		if q.Problem != "" || !f.leaves[q.Name] {
			continue
		}
		alloc, fair := gpuMilli(q.Allocated), gpuMilli(q.FairShare)
		if q.Name == f.late && !now.Before(f.lateStart) {
			f.track(now, float64(alloc) < shareReached*float64(fair) && gpuMilli(q.Pending) > 0)
		}
		if fair <= 0 {
			continue
		}
		x := float64(alloc) / float64(fair)
		sum += x
		sq += x * x
		n++
	}
	f.jain = 1
	if n > 0 && sq > 0 {
		f.jain = sum * sum / (float64(n) * sq)
	}
}

// track follows the late queue's shortages.
func (f *fairness) track(now time.Time, short bool) {
	switch {
	case short && f.shortSince.IsZero():
		f.shortSince = now
	case !short && !f.shortSince.IsZero():
		d := now.Sub(f.shortSince)
		if f.shortages == 0 {
			f.first, f.ended = d, true
		}
		f.shortages++
		f.shortTotal += d
		f.shortSince = time.Time{}
	}
}

func gpuMilli(a cycle.Amounts) int64 {
	var t int64
	for r, v := range a {
		if strings.HasPrefix(string(r), "gpu/") {
			t += v
		}
	}
	return t
}

func (f *fairness) summarise(s *metrics.Summary, span float64) {
	if f == nil || !f.reported {
		// A scheduler that knows no queues (kube, kube-gang) reports no
		// standing: its fairness is not measured, rather than shown as 1.
		return
	}
	if span > 0 {
		s.FairnessJain = f.area / span
	}
	s.LateQueue = f.late
	s.LateQueueToShareS, s.LateQueueShortMeanS = -1, -1
	if f.ended {
		s.LateQueueToShareS = f.first.Seconds()
	}
	if f.shortages > 0 {
		s.LateQueueShortMeanS = f.shortTotal.Seconds() / float64(f.shortages)
	}
}
