package cycle

import (
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/workload"
)

// TestRuntimeEstimateByUser: a user's own runs come first, narrowest
// first, and only once there are MinUserSamples of them.
func TestRuntimeEstimateByUser(t *testing.T) {
	mins := func(m, n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(m) * time.Minute
		}
		return out
	}
	type obs struct {
		job  *workload.Job
		runs []time.Duration
	}
	alice8 := build.Job("x").GPUs(8).Queue("a").User("alice").Obj()
	alice1 := build.Job("x").GPUs(1).Queue("a").User("alice").Obj()
	bob8 := build.Job("x").GPUs(8).Queue("a").User("bob").Obj()
	anon8 := build.Job("x").GPUs(8).Queue("a").Obj()
	// A user named like the queue: keys are typed, so nothing is shared.
	named := build.Job("x").GPUs(8).Queue("b").User("a").Obj()
	cases := map[string]struct {
		history []obs
		job     *workload.Job
		want    time.Duration
		src     Source
	}{
		"the user's runs of the shape": {history: []obs{{alice8, mins(10, MinUserSamples)}, {bob8, mins(600, 20)}},
			job: build.Job("j").GPUs(8).Queue("a").User("alice").Obj(), want: 10 * time.Minute, src: SourceUserShape},
		"too few of the shape: the user's": {history: []obs{{alice1, mins(20, MinUserSamples)}, {bob8, mins(600, 20)}},
			job: build.Job("j").GPUs(8).Queue("a").User("alice").Obj(), want: 20 * time.Minute, src: SourceUser},
		"too few of the user: the queue's": {history: []obs{{alice8, mins(10, MinUserSamples-1)}, {bob8, mins(600, 20)}},
			job: build.Job("j").GPUs(8).Queue("a").User("alice").Obj(), want: 600 * time.Minute, src: SourceQueueShape},
		"the user's runs in another queue count": {history: []obs{{alice8, mins(10, MinUserSamples)}, {bob8, mins(600, 20)}},
			job: build.Job("j").GPUs(8).Queue("other").User("alice").Obj(), want: 10 * time.Minute, src: SourceUserShape},
		"no user: user keys skipped": {history: []obs{{alice8, mins(10, 20)}, {bob8, mins(600, 20)}},
			job: build.Job("j").GPUs(8).Queue("a").Obj(), want: 600 * time.Minute, src: SourceQueueShape},
		"jobs without a user teach no user": {history: []obs{{anon8, mins(10, 20)}},
			job: build.Job("j").GPUs(8).Queue("a").User("carol").Obj(), want: 10 * time.Minute, src: SourceQueueShape},
		"a user named like a queue is not the queue": {history: []obs{{named, mins(10, 20)}, {bob8, mins(600, 5)}},
			job: build.Job("j").GPUs(8).Queue("a").Obj(), want: 600 * time.Minute, src: SourceQueueShape},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var h History
			for _, o := range tc.history {
				for _, d := range o.runs {
					h.Observe(o.job, d)
				}
			}
			got, src, ok := Runtime(&h, tc.job)
			if got != tc.want || src != tc.src || !ok {
				t.Errorf("Runtime = %v, %q, %v; want %v, %q, true", got, src, ok, tc.want, tc.src)
			}
		})
	}
}

// TestUserPredictsBetterThanQueue: two users share a queue, one runs short
// jobs and one long; interleaved, each user's next job is predicted better
// from its own runs than from the queue's, which is what the user keys are
// for. Without users the short user's jobs get the long user's p90.
func TestUserPredictsBetterThanQueue(t *testing.T) {
	short := []time.Duration{8 * time.Minute, 12 * time.Minute, 10 * time.Minute, 9 * time.Minute, 11 * time.Minute}
	long := []time.Duration{5 * time.Hour, 7 * time.Hour, 6 * time.Hour, 8 * time.Hour, 4 * time.Hour}
	accuracy := func(withUsers bool) (mean float64) {
		var h History
		n := 0
		for round := 0; round < 4*len(short); round++ {
			for _, u := range []struct {
				name string
				runs []time.Duration
			}{{"alice", short}, {"bob", long}} {
				b := build.Job("j").GPUs(8).Queue("a")
				if withUsers {
					b = b.User(u.name)
				}
				j := b.Obj()
				d := u.runs[round%len(u.runs)]
				if round >= len(short) { // score once the user has runs to learn from
					est, _, ok := Runtime(&h, j)
					if ok {
						mean += float64(min(est, d)) / float64(max(est, d))
					}
					n++
				}
				h.Observe(j, d)
			}
		}
		return mean / float64(n)
	}
	byUser, byQueue := accuracy(true), accuracy(false)
	if byUser < 0.6 || byUser <= byQueue+0.2 {
		t.Errorf("mean accuracy by user %.2f, by queue %.2f: want the user's clearly better (>= 0.6)", byUser, byQueue)
	}
}

// TestUserSourcesAreLearned: estimates from a user's keys share the learned
// confidence (zero until scored), and Outlived looks at the user's runs.
func TestUserSourcesAreLearned(t *testing.T) {
	for _, src := range []Source{SourceUserShape, SourceUser} {
		if !src.Learned() {
			t.Errorf("%s is not a learned source", src)
		}
		var h History
		if c := h.Confidence(src); c != 0 {
			t.Errorf("Confidence(%s) on no history = %v, want 0", src, c)
		}
	}
	var h History
	alice := build.Job("j").GPUs(8).Queue("a").User("alice").Obj()
	bob := build.Job("j").GPUs(8).Queue("a").User("bob").Obj()
	for i := 0; i < 10; i++ {
		h.Observe(alice, time.Duration(60+i)*time.Minute)
		h.Observe(bob, 10*time.Hour)
	}
	// Alice's job outlived 30m: among her runs longer than that the p90 is
	// 68m; the queue's would say 10h.
	if got, ok := h.Outlived(alice, 30*time.Minute); !ok || got != 68*time.Minute {
		t.Errorf("Outlived(alice, 30m) = %v, %v; want 1h8m0s, true", got, ok)
	}
	if c := h.Confidence(SourceUser); c <= 0.5 {
		t.Errorf("Confidence(user) = %.2f after accurate user estimates, want > 0.5", c)
	}
}
