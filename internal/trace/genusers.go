package trace

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// The user model of gen:llm (parameters users and userspread; see
// docs/simulator.md#users). It is a model, not fitted to a trace: the
// bundled Philly data holds runtimes only. What it stands for: the published
// GPU-cluster traces record who submitted each job, and their analyses find
// that a user's jobs recur, so that a job's duration is best predicted from
// the same user's earlier jobs (Hu et al., "Characterization and Prediction
// of Deep Learning Workloads in Large-Scale GPU Datacenters", SC'21, on
// Helios; the same idea on HPC logs: Tsafrir, Etsion and Feitelson, IEEE
// TPDS 2007).
const (
	// defaultUsers is how many users submit to each queue.
	defaultUsers = 8
	// defaultUserSpread is how far a user's runtimes stray from the user's
	// own scale: the standard deviation of ln(runtime) around it (1: a
	// factor of e either way). A large value makes users uninformative.
	defaultUserSpread = 1.0
)

// userModel gives each job a user of its queue. Each queue has n users;
// user k submits in proportion to 1/(k+1) (a few users submit most jobs)
// and has a scale, the log of a runtime drawn from the same runtimes the
// jobs are drawn from. A job that runs r goes to user k with probability
// proportional to its share times exp(-(ln r - scale_k)^2 / 2 spread^2):
// the users whose scale is near r. The job's runtime is drawn first and is
// untouched, so a trace with users is the trace without them plus a name per
// job. All draws come from their own stream, one per job, so that the
// users never move the other fields of a seed.
type userModel struct {
	rng    *rand.Rand
	spread float64
	queues map[string][]genUser
	odds   []float64 // scratch
}

type genUser struct {
	name  string
	share float64
	scale float64 // ln of the user's characteristic runtime in seconds
}

// newUserModel draws the users of queues. nil when n is 0: jobs get no user.
func newUserModel(seed int64, queues []string, n int, spread float64, runtimes []time.Duration) *userModel {
	if n <= 0 {
		return nil
	}
	m := &userModel{
		rng:    rand.New(rand.NewPCG(uint64(seed), 0x7573657273)), // "users"
		spread: spread,
		queues: map[string][]genUser{},
		odds:   make([]float64, n),
	}
	for _, q := range queues {
		us := make([]genUser, n)
		for k := range us {
			r := runtimes[m.rng.IntN(len(runtimes))]
			us[k] = genUser{name: fmt.Sprintf("%s-u%02d", q, k), share: 1 / float64(k+1), scale: math.Log(r.Seconds())}
		}
		m.queues[q] = us
	}
	return m
}

// user is the submitter of a job of queue that runs runtime.
func (m *userModel) user(queue string, runtime time.Duration) string {
	u := m.rng.Float64() // one draw per job, whatever the queue
	us := m.queues[queue]
	if len(us) == 0 {
		return ""
	}
	x := math.Log(max(runtime.Seconds(), 1))
	// Log-odds relative to the best user, so that exp cannot underflow
	// to all zeros for a runtime far from every scale.
	best := math.Inf(-1)
	for k, g := range us {
		z := (x - g.scale) / m.spread
		m.odds[k] = math.Log(g.share) - z*z/2
		best = max(best, m.odds[k])
	}
	var total float64
	for k := range us {
		m.odds[k] = math.Exp(m.odds[k] - best)
		total += m.odds[k]
	}
	u *= total
	for k, g := range us {
		if u < m.odds[k] {
			return g.name
		}
		u -= m.odds[k]
	}
	return us[len(us)-1].name
}
