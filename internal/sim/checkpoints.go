package sim

import (
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"time"
)

// Checkpoints is how a job really saves its state, which the scheduler does
// not know in advance: it sees a checkpoint only once the job reports it.
// Every is the job's own mean interval (jobs that declare 30 minutes do
// not all manage 30 minutes); each interval then varies by up to ±Jitter of
// it (data loading, evaluation, storage contention). The zero value
// checkpoints exactly every declared interval: the oracle of earlier
// versions.
type Checkpoints struct {
	Every  time.Duration
	Jitter float64 // 0..1
	Seed   uint64  // the job's own stream: one job, one schedule
}

// ckptSchedule is one job's checkpoint times in units of work done,
// drawn lazily as far as the job gets.
type ckptSchedule struct {
	m     Checkpoints
	rng   *rand.Rand
	times []time.Duration
}

// newCkptSchedule is job j's schedule: the run's seed mixed with the job's
// id, so that jobs differ and policies see the same schedule per job.
func newCkptSchedule(j Job) *ckptSchedule {
	h := fnv.New64a()
	h.Write([]byte(j.ID))
	m := j.Checkpoints
	return &ckptSchedule{m: m, rng: rand.New(rand.NewPCG(m.Seed, h.Sum64()))}
}

// between is the checkpoints at work in (after, upTo], ascending.
func (c *ckptSchedule) between(after, upTo time.Duration) []time.Duration {
	for len(c.times) == 0 || c.times[len(c.times)-1] <= upTo {
		last := time.Duration(0)
		if n := len(c.times); n > 0 {
			last = c.times[n-1]
		}
		step := float64(c.m.Every) * (1 + c.m.Jitter*(2*c.rng.Float64()-1))
		c.times = append(c.times, last+max(time.Second, time.Duration(step)))
	}
	lo := sort.Search(len(c.times), func(i int) bool { return c.times[i] > after })
	hi := sort.Search(len(c.times), func(i int) bool { return c.times[i] > upTo })
	return c.times[lo:hi]
}
