package baseline

import (
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/workload"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// runOn starts job j with pod i on node nodes[i], taking each pod's GPUs
// lowest-numbered first, and returns it as the snapshot's running job.
func runOn(t *testing.T, s *cluster.State, j *workload.Job, started time.Time, nodes ...string) engine.RunningJob {
	t.Helper()
	rj := engine.RunningJob{Job: j, Start: started}
	i := 0
	j.EachPod(func(ref workload.PodRef, r workload.Request) {
		n, ok := s.NodeIndex(nodes[i])
		if !ok {
			t.Fatalf("no node %s", nodes[i])
		}
		i++
		a := cluster.Alloc{CPUMilli: r.CPUMilli, MemMiB: r.MemMiB}
		pb := engine.PodBind{Placed: cluster.Placed{Pod: ref, NodeIndex: n}, Node: nodes[i-1]}
		for k, f := range s.GPUFree(n) {
			if len(a.Devices) < r.GPUs && f == 1000 {
				a.Devices = append(a.Devices, cluster.DeviceShare{Device: k, Milli: 1000})
				pb.Devices = append(pb.Devices, s.Node(n).Devices[k].ID)
			}
		}
		if err := s.Allocate(n, a); err != nil {
			t.Fatal(err)
		}
		pb.Alloc = a
		rj.Pods = append(rj.Pods, pb)
	})
	return rj
}

// outcome is what a plan did, in a form tests compare.
type outcome struct {
	Evicted map[string]int      // job -> pods evicted
	Bound   map[string][]string // job -> nodes, sorted
}

func outcomeOf(p engine.Plan) outcome {
	o := outcome{Evicted: map[string]int{}, Bound: map[string][]string{}}
	for _, ev := range p.Evictions {
		o.Evicted[string(ev.Job)] += len(ev.Pods)
	}
	for _, b := range p.Binds {
		for _, pb := range b.Pods {
			o.Bound[string(b.Job)] = append(o.Bound[string(b.Job)], pb.Node)
		}
		sort.Strings(o.Bound[string(b.Job)])
	}
	return o
}

func pending(jobs ...*workload.Job) []engine.PendingJob {
	var out []engine.PendingJob
	for _, j := range jobs {
		out = append(out, engine.PendingJob{Job: j})
	}
	return out
}

// TestKube pins what kube-scheduler does that corral does not: pods
// scheduled one by one, so part of a job starts on its own, and preemption
// by priority of single pods.
func TestKube(t *testing.T) {
	two := []cluster.Node{build.Node().Name("a").Obj(), build.Node().Name("b").Obj()}
	cases := map[string]struct {
		gang    bool
		running []*workload.Job // each on node a, then b
		nodes   [][]string
		job     *workload.Job
		want    outcome
	}{
		"kube starts the pod that fits and leaves the other waiting": {
			running: []*workload.Job{build.Job("low").GPUs(8).Priority(100).Obj()},
			nodes:   [][]string{{"a"}},
			job:     build.Job("big").Pods(2).GPUs(8).Priority(100).Obj(),
			want:    outcome{Evicted: map[string]int{}, Bound: map[string][]string{"big": {"b"}}},
		},
		"kube-gang starts none of it": {
			gang:    true,
			running: []*workload.Job{build.Job("low").GPUs(8).Priority(100).Obj()},
			nodes:   [][]string{{"a"}},
			job:     build.Job("big").Pods(2).GPUs(8).Priority(100).Obj(),
			want:    outcome{Evicted: map[string]int{}, Bound: map[string][]string{}},
		},
		"kube preempts one pod of a lower-priority job": {
			running: []*workload.Job{build.Job("low").Pods(2).GPUs(8).Obj()},
			nodes:   [][]string{{"a", "b"}},
			job:     build.Job("high").GPUs(8).Priority(100).Obj(),
			want:    outcome{Evicted: map[string]int{"low": 1}, Bound: map[string][]string{"high": {"a"}}},
		},
		"kube-gang preempts the whole lower-priority job": {
			gang:    true,
			running: []*workload.Job{build.Job("low").Pods(2).GPUs(8).Obj()},
			nodes:   [][]string{{"a", "b"}},
			job:     build.Job("high").GPUs(8).Priority(100).Obj(),
			want:    outcome{Evicted: map[string]int{"low": 2}, Bound: map[string][]string{"high": {"a"}}},
		},
		"kube takes the victim of the lowest priority": {
			running: []*workload.Job{build.Job("mid").GPUs(8).Priority(50).Obj(), build.Job("low").GPUs(8).Priority(10).Obj()},
			nodes:   [][]string{{"a"}, {"b"}},
			job:     build.Job("high").GPUs(8).Priority(100).Obj(),
			want:    outcome{Evicted: map[string]int{"low": 1}, Bound: map[string][]string{"high": {"b"}}},
		},
		"equal priority preempts nothing": {
			running: []*workload.Job{build.Job("peer").Pods(2).GPUs(8).Obj()},
			nodes:   [][]string{{"a", "b"}},
			job:     build.Job("other").GPUs(8).Obj(),
			want:    outcome{Evicted: map[string]int{}, Bound: map[string][]string{}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(cluster.Topology{}, two)
			var run []engine.RunningJob
			for i, j := range tc.running {
				run = append(run, runOn(t, s, j, t0, tc.nodes[i]...))
			}
			p := (&Kube{Gang: tc.gang}).Cycle(&engine.Snapshot{State: s, Pending: pending(tc.job), Running: run, Now: t0})
			if diff := cmp.Diff(tc.want, outcomeOf(p)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestKubeSpreads pins kube-scheduler's LeastAllocated scoring: a pod goes
// to the emptier node.
func TestKubeSpreads(t *testing.T) {
	s := build.State(cluster.Topology{}, []cluster.Node{build.Node().Name("a").Obj(), build.Node().Name("b").Obj()})
	run := []engine.RunningJob{runOn(t, s, build.Job("busy").GPUs(4).Obj(), t0, "a")}
	p := (&Kube{}).Cycle(&engine.Snapshot{State: s, Pending: pending(build.Job("one").Obj()), Running: run, Now: t0})
	if diff := cmp.Diff(map[string][]string{"one": {"b"}}, outcomeOf(p).Bound); diff != "" {
		t.Errorf("binds (-want +got):\n%s", diff)
	}
}

// TestKueueTAS pins Kueue's topology-aware admission: a gang goes whole
// into one domain of its required level, the best-fitting one; it waits
// rather than span two; it preempts the lowest priority, then the newest.
func TestKueueTAS(t *testing.T) {
	topo := build.Topo("rack")
	cases := map[string]struct {
		busy []string // nodes running a low-priority 8-GPU pod, oldest first
		job  *workload.Job
		want outcome
	}{
		"best fit: the rack with two free nodes, not the empty one": {
			busy: []string{"r0-n-0", "r0-n-1"},
			job:  build.Job("g").Pods(2).GPUs(8).Required("rack").Obj(),
			want: outcome{Evicted: map[string]int{}, Bound: map[string][]string{"g": {"r0-n-2", "r0-n-3"}}},
		},
		"waits rather than span two racks": {
			busy: []string{"r0-n-0", "r0-n-1", "r1-n-0", "r1-n-1"},
			job:  build.Job("g").Pods(3).GPUs(8).Required("rack").Obj(),
			want: outcome{Evicted: map[string]int{}, Bound: map[string][]string{}},
		},
		"a preferred level may span racks": {
			busy: []string{"r0-n-0", "r0-n-1", "r1-n-0", "r1-n-1"},
			job:  build.Job("g").Pods(3).GPUs(8).Preferred("rack").Obj(),
			want: outcome{Evicted: map[string]int{}, Bound: map[string][]string{"g": {"r0-n-2", "r0-n-3", "r1-n-2"}}},
		},
		"preempts the newest lower-priority job in one rack": {
			busy: []string{"r0-n-0", "r0-n-1", "r0-n-2", "r0-n-3", "r1-n-0", "r1-n-1", "r1-n-2", "r1-n-3"},
			job:  build.Job("g").Pods(1).GPUs(8).Priority(100).Required("rack").Obj(),
			want: outcome{Evicted: map[string]int{"busy-7": 1}, Bound: map[string][]string{"g": {"r1-n-3"}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(topo, build.Racks(2, 4))
			var run []engine.RunningJob
			for i, n := range tc.busy {
				j := build.Job("busy-" + string(rune('0'+i))).GPUs(8).Obj()
				run = append(run, runOn(t, s, j, t0.Add(time.Duration(i)*time.Minute), n))
			}
			p := (&KueueTAS{}).Cycle(&engine.Snapshot{State: s, Pending: pending(tc.job), Running: run, Now: t0.Add(time.Hour)})
			if diff := cmp.Diff(tc.want, outcomeOf(p)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNeverFitsIsRejectedAlike: a job no domain could ever hold is reported
// NeverFits by every baseline, as the engine reports it, so every policy
// rejects the same jobs.
func TestNeverFitsIsRejectedAlike(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(2, 2))
	job := build.Job("huge").Pods(3).GPUs(8).Required("rack").Obj()
	for _, name := range []string{KueueTASName} {
		b, _ := New(name)
		p := b.Cycle(&engine.Snapshot{State: s, Pending: pending(job), Now: t0})
		if len(p.Pending) != 1 || p.Pending[0].Reason.Verdict.String() != "NeverFits" {
			t.Errorf("%s: pending %+v, want NeverFits", name, p.Pending)
		}
	}
	tooBig := build.Job("nine").GPUs(9).Obj()
	for _, name := range Names {
		b, _ := New(name)
		p := b.Cycle(&engine.Snapshot{State: s, Pending: pending(tooBig), Now: t0})
		if len(p.Pending) != 1 || p.Pending[0].Reason.Verdict.String() != "NeverFits" {
			t.Errorf("%s: pending %+v, want NeverFits", name, p.Pending)
		}
	}
}
