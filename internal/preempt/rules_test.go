package preempt

import (
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cycle"
)

// gpus is n H100 GPUs in the queues' unit.
func gpus(n int64) cycle.Amounts { return cycle.Amounts{cycle.GPU("H100"): n * 1000} }

func TestProtected(t *testing.T) {
	cases := map[string]struct {
		job  *build.JobBuilder
		ran  time.Duration
		want string
	}{
		"not preemptible":               {job: build.Job("j"), ran: time.Hour, want: "not preemptible"},
		"preemptible":                   {job: build.Job("j").Preemptible(), ran: time.Minute},
		"inside its minimum runtime":    {job: build.Job("j").Preemptible().MinRuntime(time.Hour), ran: 20*time.Minute + 500*time.Millisecond, want: "inside its minimum runtime (20m0s of 1h0m0s)"},
		"its minimum runtime is served": {job: build.Job("j").Preemptible().MinRuntime(time.Hour), ran: time.Hour},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Protected(tc.job.Obj(), tc.ran); got != tc.want {
				t.Errorf("Protected = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestEligible: inside a queue only a strictly lower priority may be
// preempted; across queues only a queue that may reclaim takes back its
// guarantee, or its fair share from a queue above its own, whatever the
// priorities.
func TestEligible(t *testing.T) {
	p := func(queue string, prio int32) Standing { return Standing{Queue: queue, Priority: prio} }
	cases := map[string]struct {
		p      Standing
		charge cycle.Amounts
		v      Standing
		want   Kind
	}{
		"same queue, lower priority":  {p: p("a", 5), v: p("a", 4), want: ByPriority},
		"same queue, equal priority":  {p: p("a", 5), v: p("a", 5), want: NotAllowed},
		"same queue, higher priority": {p: p("a", 5), v: p("a", 6), want: NotAllowed},
		"no queues: priority only":    {p: p("", 1), v: p("", 0), want: ByPriority},
		"another queue, no reclaim right": {
			p:      Standing{Queue: "a", Priority: 9, Guarantee: gpus(8)},
			charge: gpus(8),
			v:      Standing{Queue: "b", Usage: gpus(16)},
			want:   NotAllowed,
		},
		"guarantee owed, the other queue borrows: whatever its priority": {
			p:      Standing{Queue: "a", Reclaim: true, Usage: gpus(4), Guarantee: gpus(16)},
			charge: gpus(8),
			v:      Standing{Queue: "b", Priority: 100, Usage: gpus(24), Guarantee: gpus(8), Fair: gpus(32)},
			want:   ByReclaim,
		},
		"guarantee owed, the other queue within its GPU guarantee and using CPU nobody guarantees": {
			p:      Standing{Queue: "a", Reclaim: true, Guarantee: gpus(16)},
			charge: cycle.Amounts{cycle.GPU("H100"): 8000, cycle.CPU: 16000},
			v:      Standing{Queue: "b", Usage: cycle.Amounts{cycle.GPU("H100"): 8000, cycle.CPU: 96000}, Guarantee: gpus(8), Fair: gpus(8)},
			want:   NotAllowed,
		},
		"guarantee owed, but the other queue is within its own": {
			p:      Standing{Queue: "a", Reclaim: true, Usage: gpus(4), Guarantee: gpus(16), Fair: gpus(4)},
			charge: gpus(8),
			v:      Standing{Queue: "b", Usage: gpus(8), Guarantee: gpus(8), Fair: gpus(16)},
			want:   NotAllowed,
		},
		"past its guarantee with the job: fair share, the other queue far above its own": {
			p:      Standing{Queue: "a", Reclaim: true, Usage: gpus(12), Guarantee: gpus(16), Fair: gpus(32)},
			charge: gpus(8),
			v:      Standing{Queue: "b", Usage: gpus(40), Fair: gpus(16)},
			want:   ByFairShare,
		},
		"fair share: the move would put it above the other queue's share": {
			p:      Standing{Queue: "a", Reclaim: true, Usage: gpus(24), Fair: gpus(16)},
			charge: gpus(8),
			v:      Standing{Queue: "b", Usage: gpus(20), Fair: gpus(16)},
			want:   NotAllowed,
		},
		"fair share: the other queue is not above its share": {
			p:      Standing{Queue: "a", Reclaim: true, Fair: gpus(16)},
			charge: gpus(8),
			v:      Standing{Queue: "b", Usage: gpus(16), Fair: gpus(16)},
			want:   NotAllowed,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Eligible(tc.p, tc.charge, tc.v); got != tc.want {
				t.Errorf("Eligible = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestKeeps: reclaim may take from a queue only what leaves it its
// guarantee (when a guarantee is owed) or its fair share at a dominant
// share no lower than the reclaimer's, so reclaim never sets off more.
func TestKeeps(t *testing.T) {
	owed := Standing{Queue: "a", Reclaim: true, Usage: gpus(4), Guarantee: gpus(16), Fair: gpus(16)}
	cases := map[string]struct {
		p       Standing
		v       Standing
		removed cycle.Amounts
		want    bool
	}{
		"guarantee: the victim keeps its own": {
			p: owed, v: Standing{Queue: "b", Usage: gpus(24), Guarantee: gpus(8), Fair: gpus(16)}, removed: gpus(16), want: true,
		},
		"guarantee: the victim would fall below its own and its share": {
			p: owed, v: Standing{Queue: "b", Usage: gpus(24), Guarantee: gpus(16), Fair: gpus(24)}, removed: gpus(16), want: false,
		},
		"fair share: the victim stays at or above the reclaimer": {
			p:       Standing{Queue: "a", Reclaim: true, Usage: gpus(8), Fair: gpus(16)},
			v:       Standing{Queue: "b", Usage: gpus(40), Fair: gpus(16)},
			removed: gpus(16), want: true,
		},
		"fair share: taking that much would push the victim below the reclaimer": {
			p:       Standing{Queue: "a", Reclaim: true, Usage: gpus(8), Fair: gpus(16)},
			v:       Standing{Queue: "b", Usage: gpus(40), Fair: gpus(16)},
			removed: gpus(32), want: false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Keeps(tc.p, gpus(8), tc.v, tc.removed); got != tc.want {
				t.Errorf("Keeps = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSparedFromFairShare: a fair-share reclaim leaves alone a job that
// reported no checkpoint in its current run (it would lose everything
// since its start); reports of an earlier run do not count.
func TestSparedFromFairShare(t *testing.T) {
	t0 := time.Unix(1_000_000, 0).UTC()
	start := t0.Add(time.Hour)
	now := start.Add(3 * time.Hour)
	cases := map[string]struct {
		reports []time.Time
		want    bool
	}{
		"no report at all":                        {want: true},
		"reports of its earlier run only":         {reports: []time.Time{t0.Add(20 * time.Minute), t0.Add(50 * time.Minute)}, want: true},
		"one report in this run":                  {reports: []time.Time{start.Add(40 * time.Minute)}},
		"an earlier run's and this run's reports": {reports: []time.Time{t0.Add(50 * time.Minute), start.Add(2 * time.Hour)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rj := cycle.RunningJob{Job: build.Job("j").Preemptible().Obj(), Start: start}
			for _, at := range tc.reports {
				rj.Checkpoints = rj.Checkpoints.Add(at)
			}
			if got := SparedFromFairShare(rj, now); got != tc.want {
				t.Errorf("SparedFromFairShare = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNoTakeBack: a queue that Strict reclaim leaves below its guarantee
// must not be able to reclaim the capacity straight back.
func TestNoTakeBack(t *testing.T) {
	fpga := cycle.Resource("example.com/fpga")
	cases := map[string]struct {
		p      Standing
		charge cycle.Amounts
		v      Standing
		want   bool
	}{
		"both guaranteed GPUs, the reclaimer within its own": {
			p: Standing{Usage: gpus(8), Guarantee: gpus(16)}, charge: gpus(8), v: Standing{Guarantee: gpus(16)}, want: true,
		},
		"the job also takes FPGAs the reclaimer has no guarantee of and the victim queue has": {
			p:      Standing{Guarantee: gpus(16)},
			charge: cycle.Amounts{cycle.GPU("H100"): 8000, fpga: 1},
			v:      Standing{Guarantee: cycle.Amounts{cycle.GPU("H100"): 16000, fpga: 2}},
			want:   false,
		},
		"FPGAs nobody is guaranteed": {
			p:      Standing{Guarantee: gpus(16)},
			charge: cycle.Amounts{cycle.GPU("H100"): 8000, fpga: 1},
			v:      Standing{Guarantee: gpus(16)},
			want:   true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := NoTakeBack(tc.p, tc.charge, tc.v); got != tc.want {
				t.Errorf("NoTakeBack = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSparedFromReclaim: a borrower that would lose more than the bound of
// progress is spared while the job reclaiming is within its grace.
func TestSparedFromReclaim(t *testing.T) {
	t0 := time.Unix(1_000_000, 0).UTC()
	start := t0.Add(time.Hour)
	cases := map[string]struct {
		ran     time.Duration
		reports []time.Duration // after start
		waited  time.Duration
		maxLost time.Duration
		want    bool
	}{
		"ran a day with no checkpoint, owner waited an hour": {ran: 24 * time.Hour, waited: time.Hour, maxLost: 6 * time.Hour, want: true},
		"the same, owner past its grace":                     {ran: 24 * time.Hour, waited: 25 * time.Hour, maxLost: 6 * time.Hour},
		"checkpointed ten minutes ago":                       {ran: 24 * time.Hour, reports: []time.Duration{24*time.Hour - 10*time.Minute}, waited: time.Hour, maxLost: 6 * time.Hour},
		"ran five hours with no checkpoint":                  {ran: 5 * time.Hour, waited: time.Hour, maxLost: 6 * time.Hour},
		"the bound turned off":                               {ran: 24 * time.Hour, waited: time.Hour, maxLost: -1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rj := cycle.RunningJob{Job: build.Job("j").Preemptible().Overhead(5 * time.Minute).Obj(), Start: start}
			for _, d := range tc.reports {
				rj.Checkpoints = rj.Checkpoints.Add(start.Add(d))
			}
			now := start.Add(tc.ran)
			lost := LostProgress(rj, now)
			if want := now.Sub(LastCheckpoint(rj, now)) + 5*time.Minute; lost != want {
				t.Fatalf("LostProgress = %v, want %v", lost, want)
			}
			if got := SparedFromReclaim(lost, tc.waited, tc.maxLost, 24*time.Hour); got != tc.want {
				t.Errorf("SparedFromReclaim(%v lost, waited %v) = %v, want %v", lost, tc.waited, got, tc.want)
			}
		})
	}
}
