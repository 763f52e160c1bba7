package baseline

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

// cq is a queue for kueue-tas: a ClusterQueue with a nominal quota of
// nominal H100s and, when limit > 0, a borrowing limit of limit - nominal.
func cq(name string, nominal, limit int64, reclaim bool) cycle.QueueSpec {
	q := cycle.QueueSpec{Name: name, Guarantee: cycle.Amounts{cycle.GPU("H100"): nominal * 1000}, Reclaim: reclaim}
	if limit > 0 {
		q.Limit = cycle.Amounts{cycle.GPU("H100"): limit * 1000}
	}
	return q
}

// TestKueueTASQuota pins what --queues means for kueue-tas, as Kueue's
// ClusterQueues admit: nominal quota, borrowing from the cohort up to a
// limit, jobs within nominal quota first, preemption by priority inside the
// ClusterQueue only, and reclaim of lent quota by a queue allowed to.
// Four 8-GPU nodes (32 H100s); jobs ask 8 GPUs per pod.
func TestKueueTASQuota(t *testing.T) {
	type run struct {
		job   *workload.Job
		nodes []string
	}
	job := func(id, queue string, pods int, prio int32, submit int64) *workload.Job {
		return build.Job(id).Queue(queue).Pods(pods).GPUs(8).Priority(prio).Submit(submit).Obj()
	}
	cases := map[string]struct {
		queues  []cycle.QueueSpec
		running []run
		pending []*workload.Job
		want    outcome
		verdict map[string]string // pending job -> verdict (", above its limit": Reason.AboveLimit)
	}{
		"a limit holds a queue at it while the cluster has room": {
			queues:  []cycle.QueueSpec{cq("a", 8, 8, false), cq("b", 8, 0, false)},
			pending: []*workload.Job{job("a-big", "a", 2, 0, 0)},
			want:    outcome{Evicted: map[string]int{}, Bound: map[string][]string{}},
			verdict: map[string]string{"a-big": "WaitQuota, above its limit"},
		},
		"a job its queue's running jobs keep under the limit is not above it": {
			queues:  []cycle.QueueSpec{cq("a", 8, 16, false), cq("b", 8, 0, false)},
			running: []run{{job("a-run", "a", 1, 0, 0), []string{"n-0"}}},
			pending: []*workload.Job{job("a-more", "a", 2, 0, 60)},
			want:    outcome{Evicted: map[string]int{}, Bound: map[string][]string{}},
			verdict: map[string]string{"a-more": "WaitQuota"},
		},
		"without a limit a queue borrows the cohort's unused quota": {
			queues:  []cycle.QueueSpec{cq("a", 8, 0, false), cq("b", 8, 0, false)},
			pending: []*workload.Job{job("a-big", "a", 3, 0, 0)},
			want:    outcome{Evicted: map[string]int{}, Bound: map[string][]string{"a-big": {"n-0", "n-1", "n-2"}}},
		},
		"preempts a lower-priority job of its own ClusterQueue to stay in quota": {
			queues:  []cycle.QueueSpec{cq("a", 16, 16, false), cq("b", 16, 0, false)},
			running: []run{{job("a-low", "a", 2, 0, 0), []string{"n-0", "n-1"}}},
			pending: []*workload.Job{job("a-high", "a", 1, 100, 60)},
			want:    outcome{Evicted: map[string]int{"a-low": 2}, Bound: map[string][]string{"a-high": {"n-0"}}},
		},
		"does not preempt another ClusterQueue's job, even of lower priority": {
			queues:  []cycle.QueueSpec{cq("a", 16, 0, false), cq("b", 16, 0, false)},
			running: []run{{job("a-low", "a", 4, 0, 0), []string{"n-0", "n-1", "n-2", "n-3"}}},
			pending: []*workload.Job{job("b-high", "b", 1, 100, 60)},
			want:    outcome{Evicted: map[string]int{}, Bound: map[string][]string{}},
			verdict: map[string]string{"b-high": "WaitQuota"},
		},
		"a queue that reclaims takes back what another borrowed": {
			queues:  []cycle.QueueSpec{cq("a", 16, 0, false), cq("b", 16, 0, true)},
			running: []run{{job("a-low", "a", 4, 0, 0), []string{"n-0", "n-1", "n-2", "n-3"}}},
			pending: []*workload.Job{job("b-job", "b", 1, 0, 60)},
			want:    outcome{Evicted: map[string]int{"a-low": 4}, Bound: map[string][]string{"b-job": {"n-0"}}},
		},
		"a queue at its nominal quota reclaims nothing: it would borrow": {
			queues: []cycle.QueueSpec{cq("a", 16, 0, false), cq("b", 8, 0, true)},
			running: []run{
				{job("a-big", "a", 3, 0, 0), []string{"n-0", "n-1", "n-2"}},
				{job("b-run", "b", 1, 0, 0), []string{"n-3"}},
			},
			pending: []*workload.Job{job("b-more", "b", 1, 0, 60)},
			want:    outcome{Evicted: map[string]int{}, Bound: map[string][]string{}},
			verdict: map[string]string{"b-more": "WaitQuota"},
		},
		"a job within nominal quota goes before a higher-priority one that borrows": {
			queues: []cycle.QueueSpec{cq("a", 16, 0, false), cq("b", 16, 0, false)},
			running: []run{
				{job("a-run", "a", 2, 100, 0), []string{"n-0", "n-1"}}, // same priority: not preemptible
				{job("b-run", "b", 1, 0, 0), []string{"n-2"}},
			},
			pending: []*workload.Job{job("a-borrows", "a", 1, 100, 60), job("b-nominal", "b", 1, 0, 120)},
			want:    outcome{Evicted: map[string]int{}, Bound: map[string][]string{"b-nominal": {"n-3"}}},
			verdict: map[string]string{"a-borrows": "WaitQuota"},
		},
		"a queue that is no ClusterQueue admits nothing": {
			queues:  []cycle.QueueSpec{cq("a", 8, 0, false)},
			pending: []*workload.Job{job("lost", "nosuch", 1, 0, 0)},
			want:    outcome{Evicted: map[string]int{}, Bound: map[string][]string{}},
			verdict: map[string]string{"lost": "Refused"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(cluster.Topology{}, build.Node().Times(4))
			var running []engine.RunningJob
			for _, r := range tc.running {
				running = append(running, runOn(t, s, r.job, t0, r.nodes...))
			}
			p := (&KueueTAS{}).Cycle(&engine.Snapshot{State: s, Pending: pending(tc.pending...), Running: running,
				Queues: tc.queues, Now: t0.Add(time.Hour)})
			if diff := cmp.Diff(tc.want, outcomeOf(p)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			got := map[string]string{}
			for _, pd := range p.Pending {
				if _, ok := tc.verdict[string(pd.Job)]; ok {
					got[string(pd.Job)] = pd.Reason.Verdict.String()
					if pd.Reason.AboveLimit {
						got[string(pd.Job)] += ", above its limit"
					}
				}
			}
			if diff := cmp.Diff(tc.verdict, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestKueueTASQueueStanding: with queues, kueue-tas reports each
// ClusterQueue's standing as the engine does (issue 17), so the simulator
// measures its Jain's index: usage after this cycle's evictions and
// admissions, against the fair share of the same tree and demand.
func TestKueueTASQueueStanding(t *testing.T) {
	s := build.State(cluster.Topology{}, build.Node().Times(4))
	low := build.Job("a-low").Queue("a").Pods(4).GPUs(8).Obj()
	back := build.Job("b-job").Queue("b").Pods(1).GPUs(8).Submit(60).Obj()
	running := []engine.RunningJob{runOn(t, s, low, t0, "n-0", "n-1", "n-2", "n-3")}
	queues := []cycle.QueueSpec{cq("a", 16, 0, false), cq("b", 16, 0, true)}
	p := (&KueueTAS{}).Cycle(&engine.Snapshot{State: s, Pending: pending(back), Running: running, Queues: queues, Now: t0.Add(time.Hour)})
	if diff := cmp.Diff(outcome{Evicted: map[string]int{"a-low": 4}, Bound: map[string][]string{"b-job": {"n-0"}}}, outcomeOf(p)); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	gpus := func(a cycle.Amounts) int64 { return a[cycle.GPU("H100")] / 1000 }
	got := map[string][2]int64{}
	for _, q := range p.Queues {
		if q.Leaf {
			got[q.Name] = [2]int64{gpus(q.Allocated), gpus(q.FairShare)}
		}
	}
	// a's 32 GPUs were evicted (it waits again: demand 32), b holds the 8
	// it asked for: fair shares b 8, a the other 24.
	want := map[string][2]int64{"a": {0, 24}, "b": {8, 8}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("standing [allocated, fair share] (-want +got):\n%s", diff)
	}
	if p := (&KueueTAS{}).Cycle(&engine.Snapshot{State: s, Pending: pending(back), Now: t0}); p.Queues != nil {
		t.Errorf("without queues: standing %+v, want none", p.Queues)
	}
}
