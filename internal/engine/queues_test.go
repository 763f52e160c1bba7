package engine

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/backfill"
	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/queue"
	"github.com/corral-dev/corral/internal/workload"
)

var t0 = time.Unix(1_000_000, 0).UTC()

// h100 is n H100 GPUs in the queues' unit.
func h100(n int64) queue.Amounts { return queue.Amounts{queue.GPU("H100"): n * workload.MilliPerGPU} }

// pin runs a job with pod i on whole node nodes[i] (its first GPUs), as if
// it had started at start, and takes its capacity from s.
func pin(t *testing.T, s *cluster.State, j *workload.Job, start time.Time, nodes ...string) RunningJob {
	t.Helper()
	if j.Submit.Equal(bfEpoch) {
		// Not given a submit time: submitted when it started. (A job that
		// started only after waiting past the starvation age is not
		// preempted for priority.)
		j.Submit = start
	}
	rj := RunningJob{Job: j, Start: start}
	k := 0
	j.EachPod(func(ref workload.PodRef, r workload.Request) {
		n, ok := s.NodeIndex(nodes[k])
		if !ok {
			t.Fatalf("no node %s", nodes[k])
		}
		k++
		a := cluster.Alloc{CPUMilli: r.CPUMilli, MemMiB: r.MemMiB}
		for d := 0; d < r.GPUs; d++ {
			a.Devices = append(a.Devices, cluster.DeviceShare{Device: d, Milli: workload.MilliPerGPU})
		}
		if err := s.Allocate(n, a); err != nil {
			t.Fatal(err)
		}
		rj.Pods = append(rj.Pods, PodBind{Placed: cluster.Placed{Pod: ref, NodeIndex: n, Alloc: a}, Node: nodes[k-1]})
	})
	return rj
}

func pendingOf(jobs ...*workload.Job) []PendingJob {
	var out []PendingJob
	for _, j := range jobs {
		out = append(out, PendingJob{Job: j})
	}
	return out
}

// gpusBound sums the GPUs the plan binds per queue of the given jobs.
func queueGPUs(p Plan) map[string]int64 {
	out := map[string]int64{}
	for _, q := range p.Queues {
		if q.Problem == "" {
			out[q.Name] = q.Allocated[queue.GPU("H100")] / workload.MilliPerGPU
		}
	}
	return out
}

func reasonOf(p Plan, id workload.JobID) Reason {
	for _, pe := range p.Pending {
		if pe.Job == id {
			return pe.Reason
		}
	}
	return Reason{}
}

// jobs makes n jobs of queue q, each of pods×8 GPUs, submitted in order.
func jobs(q string, n, pods int) []*workload.Job {
	var out []*workload.Job
	for i := 0; i < n; i++ {
		out = append(out, build.Job(fmt.Sprintf("%s-%02d", q, i)).Queue(q).Pods(pods).GPUs(8).Submit(t0.Unix()+int64(i)).Obj())
	}
	return out
}

func TestQueuesReachTheirShares(t *testing.T) {
	cases := map[string]struct {
		queues []queue.Spec
		want   map[string]int64 // GPUs each queue holds after one cycle
	}{
		"equal guarantees split the cluster evenly": {
			queues: []queue.Spec{{Name: "a", Guarantee: h100(32)}, {Name: "b", Guarantee: h100(32)}},
			want:   map[string]int64{"a": 32, "b": 32},
		},
		"uneven guarantees": {
			queues: []queue.Spec{{Name: "a", Guarantee: h100(48)}, {Name: "b", Guarantee: h100(16)}},
			want:   map[string]int64{"a": 48, "b": 16},
		},
		"weights divide what nobody is guaranteed": {
			queues: []queue.Spec{{Name: "a"}, {Name: "b", Weight: map[queue.Resource]float64{queue.AllResources: 3}}},
			want:   map[string]int64{"a": 16, "b": 48},
		},
		"a limit caps a queue and the rest goes to the other": {
			queues: []queue.Spec{{Name: "a", Limit: h100(8)}, {Name: "b"}},
			want:   map[string]int64{"a": 8, "b": 56},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(build.Topo("rack"), build.Racks(2, 4)) // 64 GPUs
			all := append(jobs("a", 10, 1), jobs("b", 10, 1)...)
			p := New(Config{}).Cycle(&Snapshot{State: s, Pending: pendingOf(all...), Queues: tc.queues, Now: t0})
			if diff := cmp.Diff(tc.want, queueGPUs(p)); diff != "" {
				t.Errorf("GPUs per queue (-want +got):\n%s", diff)
			}
			// The plan's binds add up to the same.
			bound := map[string]int64{}
			for _, b := range p.Binds {
				bound[string(b.Job)[:1]] += int64(len(b.Pods)) * 8
			}
			if diff := cmp.Diff(tc.want, bound); diff != "" {
				t.Errorf("bound GPUs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQueueLimitMakesJobsWaitWithAReason(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(1, 4))
	qs := []queue.Spec{{Name: "a", Limit: h100(16)}}
	js := jobs("a", 3, 1)
	p := New(Config{}).Cycle(&Snapshot{State: s, Pending: pendingOf(js...), Queues: qs, Now: t0})
	if len(p.Binds) != 2 {
		t.Fatalf("want 2 jobs bound under a 16-GPU limit, got %d", len(p.Binds))
	}
	r := reasonOf(p, js[2].ID)
	if r.Verdict != placement.WaitQuota {
		t.Fatalf("verdict %v, want WaitQuota", r.Verdict)
	}
	for _, want := range []string{`queue "a"`, "gpu/H100", "16 H100 GPUs"} {
		if !strings.Contains(r.Message, want) {
			t.Errorf("reason %q does not name %q", r.Message, want)
		}
	}
}

func TestJobsTheirQueueRefusesAreNeverScheduled(t *testing.T) {
	qs := []queue.Spec{
		{Name: "org"},
		{Name: "team", Parent: "org", Namespaces: []string{"ns-a"}},
		{Name: "x", Parent: "y"}, {Name: "y", Parent: "x"}, // a cycle
		{Name: "open"},
	}
	cases := map[string]struct {
		job  *workload.Job
		want string
	}{
		"unknown queue":            {build.Job("j").Queue("nope").Obj(), `queue "nope" does not exist`},
		"inner queue":              {build.Job("j").Queue("org").Obj(), `queue "org" is not a leaf queue; submit to one of its leaves (team)`},
		"namespace not admitted":   {build.Job("j").Queue("team").Namespace("ns-b").Obj(), `namespace "ns-b" may not submit to queue "team" (it admits namespaces ns-a)`},
		"queue on a parent cycle":  {build.Job("j").Queue("x").Obj(), `queue "x" is invalid: parent cycle: x -> y -> x`},
		"no queue and no default":  {build.Job("j").Queue("").Namespace("ns-a").Obj(), `namespace "ns-a" has no default queue`},
		"admitted namespace lands": {build.Job("j").Queue("team").Namespace("ns-a").Obj(), ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(build.Topo("rack"), build.Racks(1, 2))
			ok := build.Job("other").Queue("open").Obj()
			p := New(Config{}).Cycle(&Snapshot{State: s, Pending: pendingOf(tc.job, ok), Queues: qs, Now: t0})
			if got := outcomeOf(p, ok.ID); !got.Placed {
				t.Errorf("a job of a valid queue was disturbed: %+v", got)
			}
			r := reasonOf(p, tc.job.ID)
			if tc.want == "" {
				if !outcomeOf(p, tc.job.ID).Placed {
					t.Fatalf("job not placed: %+v", r)
				}
				return
			}
			if r.Verdict != placement.Refused || !strings.Contains(r.Message, tc.want) {
				t.Errorf("reason %v %q, want Refused containing %q", r.Verdict, r.Message, tc.want)
			}
		})
	}
}

func TestQueueCycleIsAProblemAndNothingElseMoves(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(1, 2))
	running := pin(t, s, build.Job("run").Queue("a").GPUs(8).Preemptible().Obj(), t0, "r0-n-0")
	qs := []queue.Spec{{Name: "a", Guarantee: h100(8)}, {Name: "x", Parent: "y"}, {Name: "y", Parent: "x"}}
	p := New(Config{}).Cycle(&Snapshot{State: s, Running: []RunningJob{running}, Queues: qs, Now: t0,
		Pending: pendingOf(build.Job("new").Queue("a").GPUs(8).Obj())})
	var names, problems []string
	for _, q := range p.Queues {
		names = append(names, q.Name)
		if q.Problem != "" {
			problems = append(problems, q.Name+": "+q.Problem)
		}
	}
	if diff := cmp.Diff([]string{"a", "x", "y"}, names); diff != "" {
		t.Errorf("queues reported (-want +got):\n%s", diff)
	}
	want := []string{"x: parent cycle: x -> y -> x", "y: parent cycle: x -> y -> x"}
	if diff := cmp.Diff(want, problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if len(p.Evictions) != 0 || !outcomeOf(p, "new").Placed {
		t.Errorf("the valid queue was disturbed: evictions %v, new job %+v", p.Evictions, outcomeOf(p, "new"))
	}
	if got := queueGPUs(p)["a"]; got != 16 {
		t.Errorf("queue a holds %d GPUs after the cycle, want 16", got)
	}
}

func TestDRFTakesTurnsAcrossQueues(t *testing.T) {
	// Queue b already holds 24 GPUs; with equal fair shares a goes first
	// until it passes b, then b goes.
	s := build.State(build.Topo("rack"), build.Racks(2, 4))
	var running []RunningJob
	for i := 0; i < 3; i++ {
		running = append(running, pin(t, s, build.Job(fmt.Sprintf("b-run%d", i)).Queue("b").GPUs(8).Obj(), t0, fmt.Sprintf("r1-n-%d", i)))
	}
	qs := []queue.Spec{{Name: "a"}, {Name: "b"}}
	all := append(jobs("a", 6, 1), jobs("b", 6, 1)...)
	p := New(Config{}).Cycle(&Snapshot{State: s, Pending: pendingOf(all...), Running: running, Queues: qs, Now: t0})
	var got []string
	for _, b := range p.Binds {
		got = append(got, string(b.Job))
	}
	// 40 GPUs free: a catches up to 32, then b takes the last 8.
	want := []string{"a-00", "a-01", "a-02", "a-03", "b-00"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bind order (-want +got):\n%s", diff)
	}
}

func TestAgingLetsAnOldJobPassNewerHigherPriorityOnes(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(1, 1)) // one node: one 8-GPU job
	old := build.Job("old").Queue("a").GPUs(8).Priority(0).Submit(0).Obj()
	newer := build.Job("newer").Queue("a").GPUs(8).Priority(3).Submit(5 * 3600).Obj()
	qs := []queue.Spec{{Name: "a"}}
	now := time.Unix(6*3600, 0).UTC() // old has waited 6 h: effective priority 6 > 3
	p := New(Config{Aging: time.Hour}).Cycle(&Snapshot{State: s, Pending: pendingOf(newer, old), Queues: qs, Now: now})
	if !outcomeOf(p, "old").Placed {
		t.Errorf("the aged job did not go first: %+v", p.Pending)
	}
	p = New(Config{Aging: -1}).Cycle(&Snapshot{State: s, Pending: pendingOf(newer, old), Queues: qs, Now: now})
	if !outcomeOf(p, "newer").Placed {
		t.Errorf("without aging the higher priority did not go first: %+v", p.Pending)
	}
}

func TestQueueStatusReportsPendingAndBorrowed(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(1, 2))
	qs := []queue.Spec{{Name: "a", Guarantee: h100(4)}}
	js := jobs("a", 3, 1)
	p := New(Config{}).Cycle(&Snapshot{State: s, Pending: pendingOf(js...), Queues: qs, Now: t0})
	if len(p.Queues) != 1 {
		t.Fatalf("queues: %+v", p.Queues)
	}
	q := p.Queues[0]
	got := []int64{q.Allocated[queue.GPU("H100")], q.Borrowed[queue.GPU("H100")], q.Pending[queue.GPU("H100")], q.FairShare[queue.GPU("H100")]}
	want := []int64{16000, 12000, 8000, 16000}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("allocated, borrowed, pending, fair share (-want +got):\n%s", diff)
	}
}

// sortedIDs lists the evicted jobs.
func evicted(p Plan) []string {
	var out []string
	for _, e := range p.Evictions {
		out = append(out, string(e.Job))
	}
	sort.Strings(out)
	return out
}

// TestEvictionsForRoomLeaveTheQueueUsage: pods taken from queue a's jobs to
// make room for queue b's job, by shrinking an elastic job or taking a pool
// back, leave a's usage at once, as preemption's victims do: what DRF
// orders and limits check later in the cycle is what a holds after them.
func TestEvictionsForRoomLeaveTheQueueUsage(t *testing.T) {
	prefill := backfill.Pool{Name: "prefill", Class: "prefill", NodeLabels: map[string]string{build.LabelPrefix + "rack": "r1"},
		Others: backfill.PoolPreemptible}
	cases := map[string]struct {
		pools []backfill.Pool
		run   func(w *world)
		job   *workload.Job
		cause EvictionCause
		want  map[string]int64 // GPUs per queue after the cycle
	}{
		"shrink": {
			run: func(w *world) {
				w.run(build.Job("e").Queue("a").GPUs(8).Pods(4).Min(1).Expected(10*time.Hour).Obj(),
					"r0-n-0", "r0-n-1", "r1-n-0", "r1-n-1")
			},
			job: build.Job("j").Queue("b").GPUs(8).Expected(time.Hour).Obj(), cause: CauseShrink,
			want: map[string]int64{"a": 24, "b": 8},
		},
		"pool reclaim": {
			pools: []backfill.Pool{prefill},
			run: func(w *world) {
				w.run(build.Job("busy").Queue("a").GPUs(8).Pods(2).Expected(time.Hour).Obj(), "r0-n-0", "r0-n-1")
				w.run(build.Job("other").Queue("a").GPUs(8).Pods(2).Preemptible().Expected(time.Hour).Obj(), "r1-n-0", "r1-n-1")
			},
			job: build.Job("j").Queue("b").Class("prefill").GPUs(8).Expected(time.Hour).Obj(), cause: CauseReclaim,
			want: map[string]int64{"a": 16, "b": 8},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, build.State(build.Topo("rack"), build.Racks(2, 2)), Config{Policy: Corral})
			w.queues = []queue.Spec{{Name: "a"}, {Name: "b"}}
			w.pools = tc.pools
			tc.run(w)
			w.submit(tc.job)
			p := w.runCycle()
			if len(p.Evictions) == 0 || p.Evictions[0].Cause != tc.cause || !outcomeOf(p, "j").Placed {
				t.Fatalf("want j placed after a %s eviction; evictions %+v, pending %+v", tc.cause, p.Evictions, p.Pending)
			}
			if diff := cmp.Diff(tc.want, queueGPUs(p)); diff != "" {
				t.Errorf("GPUs per queue (-want +got):\n%s", diff)
			}
		})
	}
}
