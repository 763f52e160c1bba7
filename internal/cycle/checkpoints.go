package cycle

import (
	"math"
	"sort"
	"time"
)

// MaxCheckpoints is how many reported checkpoints a driver keeps per run:
// enough intervals for their spread to mean something, few enough that an
// old rhythm (a job that changed its checkpoint interval) fades out.
const MaxCheckpoints = 16

// Checkpoints is what a running job has reported of its checkpoints in its
// current run, ascending: the times it said it had saved its state (the
// corral.dev/last-checkpoint annotation as the driver saw it change, or the
// simulated training loop). Only reports count, never a declared interval
// (issue 17): a job whose reports are missing loses everything since its
// start. Drivers keep the last MaxCheckpoints with Add.
type Checkpoints []time.Time

// Add is c with the report t: appended when it is later than the last one
// (a repeated or older value is no new checkpoint), the oldest dropped past
// MaxCheckpoints. c itself is not changed.
func (c Checkpoints) Add(t time.Time) Checkpoints {
	if t.IsZero() || (len(c) > 0 && !t.After(c[len(c)-1])) {
		return c
	}
	keep := c
	if len(keep) >= MaxCheckpoints {
		keep = keep[len(keep)-MaxCheckpoints+1:]
	}
	out := make(Checkpoints, 0, len(keep)+1)
	return append(append(out, keep...), t)
}

// Last is the latest report; zero when there is none.
func (c Checkpoints) Last() time.Time {
	if len(c) == 0 {
		return time.Time{}
	}
	return c[len(c)-1]
}

// Within is the reports after start and not after now: those of the current
// run a scheduler may believe (a time ahead of its clock is no report yet).
func (c Checkpoints) Within(start, now time.Time) Checkpoints {
	lo := sort.Search(len(c), func(i int) bool { return c[i].After(start) })
	hi := sort.Search(len(c), func(i int) bool { return c[i].After(now) })
	if lo >= hi {
		return nil
	}
	return c[lo:hi]
}

// Intervals is the time between consecutive reports. The span from the
// job's start to its first report is not one: it holds the restart
// overhead and whatever the job did before its first save.
func (c Checkpoints) Intervals() []time.Duration {
	if len(c) < 2 {
		return nil
	}
	out := make([]time.Duration, len(c)-1)
	for i := 1; i < len(c); i++ {
		out[i-1] = c[i].Sub(c[i-1])
	}
	return out
}

// Prediction is the next checkpoint a job's own reports suggest.
type Prediction struct {
	Next      time.Time     // the last report plus the mean interval
	Mean      time.Duration // of the observed intervals
	Spread    float64       // their sample standard deviation over their mean; NaN for one interval
	Intervals int           // how many intervals it rests on
}

// Predict extrapolates the reports: the next checkpoint one mean interval
// after the last. ok is false below one interval; one interval says
// nothing of how regular the job is (Spread NaN). How much to trust it
// (how many intervals, how small a spread) is the caller's decision.
func (c Checkpoints) Predict() (p Prediction, ok bool) {
	iv := c.Intervals()
	if len(iv) == 0 {
		return Prediction{}, false
	}
	var sum float64
	for _, d := range iv {
		sum += float64(d)
	}
	mean := sum / float64(len(iv))
	p = Prediction{Mean: time.Duration(mean), Intervals: len(iv), Spread: math.NaN()}
	if len(iv) >= 2 && mean > 0 {
		var sq float64
		for _, d := range iv {
			sq += (float64(d) - mean) * (float64(d) - mean)
		}
		p.Spread = math.Sqrt(sq/float64(len(iv)-1)) / mean
	}
	p.Next = c.Last().Add(p.Mean)
	return p, true
}
