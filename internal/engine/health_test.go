package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/health"
	"github.com/corral-dev/corral/internal/workload"
)

// healthWorld is a cluster of racks r0 and r1 with three 8-GPU nodes each
// and a running job of 8-GPU pods on the named nodes, in order.
type healthWorld struct {
	s   *cluster.State
	run RunningJob
}

func newHealthWorld(t *testing.T, job *workload.Job, nodes ...string) *healthWorld {
	t.Helper()
	return newHealthWorldOn(t, build.State(build.Topo("rack"), build.Racks(2, 3)), job, nodes...)
}

// newHealthWorldOn runs job on state s, its pods in order on nodes.
func newHealthWorldOn(t *testing.T, s *cluster.State, job *workload.Job, nodes ...string) *healthWorld {
	t.Helper()
	w := &healthWorld{s: s}
	w.run = RunningJob{Job: job, Start: t0}
	i := 0
	job.EachPod(func(ref workload.PodRef, r workload.Request) {
		n, ok := w.s.NodeIndex(nodes[i])
		if !ok {
			t.Fatalf("no node %s", nodes[i])
		}
		a := cluster.Alloc{CPUMilli: r.CPUMilli, MemMiB: r.MemMiB}
		var ids []string
		for k := 0; k < r.GPUs; k++ {
			a.Devices = append(a.Devices, cluster.DeviceShare{Device: k, Milli: 1000})
			ids = append(ids, w.s.Node(n).Devices[k].ID)
		}
		if err := w.s.Allocate(n, a); err != nil {
			t.Fatal(err)
		}
		w.run.Pods = append(w.run.Pods, PodBind{Placed: cluster.Placed{Pod: ref, NodeIndex: n, Alloc: a}, Node: nodes[i], Devices: ids})
		i++
	})
	return w
}

// failDevice marks device k of a node failed in the state and the records.
func (w *healthWorld) failDevice(t *testing.T, node string, k int) health.Failure {
	t.Helper()
	n, _ := w.s.NodeIndex(node)
	w.s.SetDeviceHealth(n, k, false)
	return health.Failure{Node: node, Device: w.s.Node(n).Devices[k].ID, Since: t0, Reason: "XID 79"}
}

// fillNode takes every free GPU of a node.
func (w *healthWorld) fillNode(t *testing.T, node string) {
	t.Helper()
	occupy(t, w.s, node)
}

func gang(id string) *workload.Job {
	j := build.Job(id).Pods(2).GPUs(8).Obj()
	j.CheckpointInterval = 10 * time.Minute
	return j
}

// remediation is what a test checks of one cycle's health decisions.
type remediation struct {
	Action  workload.Remediation
	Evicted []string // pod refs
	Domain  string
}

func remediationOf(p Plan) []remediation {
	var out []remediation
	for _, r := range p.Remediations {
		rm := remediation{Action: r.Action, Domain: r.Domain}
		for _, ref := range r.Pods {
			rm.Evicted = append(rm.Evicted, ref.String())
		}
		out = append(out, rm)
	}
	return out
}

func TestRemediation(t *testing.T) {
	cases := map[string]struct {
		job    func() *workload.Job
		nodes  []string
		setup  func(t *testing.T, w *healthWorld) []health.Failure
		policy Policy
		now    time.Time
		want   []remediation
	}{
		"a failed GPU under a gang replaces only its rank, in the rack": {
			job: func() *workload.Job { return gang("g") }, nodes: []string{"r0-n-0", "r0-n-1"},
			setup: func(t *testing.T, w *healthWorld) []health.Failure {
				return []health.Failure{w.failDevice(t, "r0-n-0", 3)}
			},
			want: []remediation{{Action: workload.ReplaceRanks, Evicted: []string{"g/0-0"}, Domain: "r0"}},
		},
		"no room in the rack restarts the whole gang": {
			job: func() *workload.Job { return gang("g") }, nodes: []string{"r0-n-0", "r0-n-1"},
			setup: func(t *testing.T, w *healthWorld) []health.Failure {
				w.fillNode(t, "r0-n-2")
				return []health.Failure{w.failDevice(t, "r0-n-0", 3)}
			},
			want: []remediation{{Action: workload.RestartGang, Evicted: []string{"g/0-0", "g/0-1"}}},
		},
		"a failed node takes its ranks": {
			job: func() *workload.Job { return gang("g") }, nodes: []string{"r1-n-0", "r1-n-1"},
			setup: func(t *testing.T, w *healthWorld) []health.Failure {
				n, _ := w.s.NodeIndex("r1-n-1")
				w.s.SetSchedulable(n, false)
				return []health.Failure{{Node: "r1-n-1", Since: t0, Reason: "NotReady"}}
			},
			want: []remediation{{Action: workload.ReplaceRanks, Evicted: []string{"g/0-1"}, Domain: "r1"}},
		},
		"a cordon alone evicts nothing": {
			job: func() *workload.Job { return gang("g") }, nodes: []string{"r1-n-0", "r1-n-1"},
			setup: func(t *testing.T, w *healthWorld) []health.Failure {
				n, _ := w.s.NodeIndex("r1-n-1")
				w.s.SetSchedulable(n, false)
				return nil
			},
		},
		"WaitForRepair keeps the job within its limit": {
			job: func() *workload.Job {
				j := gang("g")
				j.Remediation, j.RepairWait = workload.WaitForRepair, time.Hour
				return j
			},
			nodes: []string{"r0-n-0", "r0-n-1"}, now: t0.Add(59 * time.Minute),
			setup: func(t *testing.T, w *healthWorld) []health.Failure {
				return []health.Failure{w.failDevice(t, "r0-n-1", 0)}
			},
			want: []remediation{{Action: workload.WaitForRepair}},
		},
		"WaitForRepair restarts past its limit": {
			job: func() *workload.Job {
				j := gang("g")
				j.Remediation, j.RepairWait = workload.WaitForRepair, time.Hour
				return j
			},
			nodes: []string{"r0-n-0", "r0-n-1"}, now: t0.Add(61 * time.Minute),
			setup: func(t *testing.T, w *healthWorld) []health.Failure {
				return []health.Failure{w.failDevice(t, "r0-n-1", 0)}
			},
			want: []remediation{{Action: workload.RestartGang, Evicted: []string{"g/0-0", "g/0-1"}}},
		},
		"replicas are replaced anywhere": {
			job: func() *workload.Job { return build.Job("inf").Pods(3).GPUs(8).Min(1).Obj() },
			// r1 is full apart from the replicas: the replacement goes to r0.
			nodes: []string{"r1-n-0", "r1-n-1", "r1-n-2"},
			setup: func(t *testing.T, w *healthWorld) []health.Failure {
				return []health.Failure{w.failDevice(t, "r1-n-2", 7)}
			},
			want: []remediation{{Action: workload.ReplaceRanks, Evicted: []string{"inf/0-2"}, Domain: "cluster"}},
		},
		"the baselines restart the whole job": {
			job: func() *workload.Job { return gang("g") }, nodes: []string{"r0-n-0", "r0-n-1"}, policy: Spread,
			setup: func(t *testing.T, w *healthWorld) []health.Failure {
				return []health.Failure{w.failDevice(t, "r0-n-0", 3)}
			},
			want: []remediation{{Action: workload.RestartGang, Evicted: []string{"g/0-0", "g/0-1"}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newHealthWorld(t, tc.job(), tc.nodes...)
			failures := tc.setup(t, w)
			now := tc.now
			if now.IsZero() {
				now = t0.Add(25 * time.Minute)
			}
			policy := tc.policy
			if policy == "" {
				policy = Corral
			}
			// The job reports its 10-minute checkpoints (only reported
			// ones count, issue 17).
			if done := now.Sub(t0) / (10 * time.Minute); done > 0 {
				w.run.Checkpoints = reportedEvery(t0, t0.Add(done*10*time.Minute), 10*time.Minute)
			}
			plan := New(Config{Policy: policy}).Cycle(&Snapshot{State: w.s, Running: []RunningJob{w.run}, Failures: failures, Now: now})
			if diff := cmp.Diff(tc.want, remediationOf(plan)); diff != "" {
				t.Errorf("remediations (-want +got):\n%s", diff)
			}
			for _, ev := range plan.Evictions {
				if ev.Cause != CauseFailure {
					t.Errorf("eviction cause %s, want %s", ev.Cause, CauseFailure)
				}
				if len(failures) > 0 && !strings.Contains(ev.Message, failures[0].Node) {
					t.Errorf("eviction message %q does not name node %s", ev.Message, failures[0].Node)
				}
				// A strict gang loses every rank's work since the last
				// 10-minute checkpoint, whichever pods go.
				if want := 16 * (now.Sub(t0) % (10 * time.Minute)).Seconds(); ev.Job == "g" && ev.LostGPUSeconds != want {
					t.Errorf("lost %v GPU-seconds, want %v", ev.LostGPUSeconds, want)
				}
			}
		})
	}
}

// apply carries a plan out on the test's state, as a driver would.
func (w *healthWorld) apply(t *testing.T, p Plan) {
	t.Helper()
	for _, ev := range p.Evictions {
		for _, ref := range ev.Pods {
			for i, pb := range w.run.Pods {
				if pb.Pod == ref {
					w.s.Release(pb.NodeIndex, pb.Alloc)
					w.run.Pods = append(w.run.Pods[:i], w.run.Pods[i+1:]...)
					break
				}
			}
		}
	}
	for _, b := range p.Binds {
		for _, pb := range b.Pods {
			if err := w.s.Allocate(pb.NodeIndex, pb.Alloc); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestReplacementLandsInTheRackOnHealthyDevices(t *testing.T) {
	w := newHealthWorld(t, gang("g"), "r0-n-0", "r0-n-1")
	// Another rack is emptier: an unpinned placement would go there.
	f := w.failDevice(t, "r0-n-0", 3)
	eng := New(Config{Policy: Corral})
	now := t0.Add(25 * time.Minute)
	p1 := eng.Cycle(&Snapshot{State: w.s, Running: []RunningJob{w.run}, Failures: []health.Failure{f}, Now: now})
	if len(p1.Remediations) != 1 || p1.Remediations[0].Domain != "r0" {
		t.Fatalf("remediations %+v, want one in r0", p1.Remediations)
	}
	w.apply(t, p1)
	r := p1.Remediations[0]
	other := build.Job("other").Pods(1).GPUs(8).Submit(-1).Obj() // older: ordered first
	p2 := eng.Cycle(&Snapshot{State: w.s, Running: []RunningJob{w.run}, Failures: []health.Failure{f}, Now: now,
		Pending: []PendingJob{
			{Job: other},
			{Job: w.run.Job, Waiting: r.Pods, Within: Pin{Level: r.Level, Domain: r.Domain}},
		}})
	if len(p2.Evictions) != 0 {
		t.Errorf("second cycle evicts %+v", p2.Evictions)
	}
	got := outcomeOf(p2, "g")
	if diff := cmp.Diff(outcome{Placed: true, Level: "host", Domain: "r0-n-2", Nodes: []string{"r0-n-2"}}, got); diff != "" {
		t.Errorf("replacement (-want +got):\n%s", diff)
	}
	assertNoFailedDevice(t, w.s, p2)
}

func assertNoFailedDevice(t *testing.T, s *cluster.State, p Plan) {
	t.Helper()
	for _, b := range p.Binds {
		for _, pb := range b.Pods {
			for _, d := range pb.Alloc.Devices {
				if !s.DeviceHealthy(pb.NodeIndex, d.Device) {
					t.Errorf("job %s pod %s bound to failed device %s on %s", b.Job, pb.Pod, s.Node(pb.NodeIndex).Devices[d.Device].ID, pb.Node)
				}
			}
		}
	}
}

func TestNothingLandsOnFailedDevices(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(1, 2))
	// Every GPU of r0-n-0 but one failed; r0-n-1 lost gpu0.
	for k := 1; k < 8; k++ {
		s.SetDeviceHealth(0, k, false)
	}
	s.SetDeviceHealth(1, 0, false)
	var jobs []*workload.Job
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
		jobs = append(jobs, build.Job(id).GPUs(1).Obj())
	}
	for _, policy := range Policies {
		p := runCycle(s, policy, jobs...)
		assertNoFailedDevice(t, s, p)
		placed := 0
		for _, b := range p.Binds {
			placed += len(b.Pods)
		}
		// 1 + 7 healthy GPUs: the ninth job waits.
		if placed != 8 {
			t.Errorf("%s placed %d one-GPU pods on 8 healthy GPUs, want 8", policy, placed)
		}
	}
}

func TestSuspectNodes(t *testing.T) {
	cases := map[string]struct {
		rejections int
		until      time.Duration
		want       outcome
	}{
		"no suspect: best fit takes the fuller node": {want: outcome{Placed: true, Level: "host", Domain: "r0-n-0", Nodes: []string{"r0-n-0"}}},
		"one rejection: scored last":                 {rejections: 1, until: time.Hour, want: outcome{Placed: true, Level: "host", Domain: "r0-n-1", Nodes: []string{"r0-n-1"}}},
		"at the limit: left out":                     {rejections: 3, until: time.Hour, want: outcome{Placed: true, Level: "host", Domain: "r0-n-1", Nodes: []string{"r0-n-1"}}},
		"lapsed suspicion: back in":                  {rejections: 3, until: -time.Minute, want: outcome{Placed: true, Level: "host", Domain: "r0-n-0", Nodes: []string{"r0-n-0"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := build.State(build.Topo("rack"), build.Racks(1, 2))
			// r0-n-0 has 4 GPUs taken: best fit prefers it.
			if err := s.Allocate(0, cluster.Alloc{Devices: []cluster.DeviceShare{{Device: 0, Milli: 1000}, {Device: 1, Milli: 1000}, {Device: 2, Milli: 1000}, {Device: 3, Milli: 1000}}}); err != nil {
				t.Fatal(err)
			}
			snap := &Snapshot{State: s, Now: t0, Pending: []PendingJob{{Job: build.Job("j").GPUs(2).Obj()}}}
			if tc.rejections > 0 {
				snap.Suspects = []health.Suspect{{Node: "r0-n-0", Rejections: tc.rejections, Until: t0.Add(tc.until)}}
			}
			got := outcomeOf(New(Config{}).Cycle(snap), "j")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestExcludedSuspectLeavesJobsWaiting(t *testing.T) {
	s := build.State(build.Topo("rack"), build.Racks(1, 1))
	snap := &Snapshot{State: s, Now: t0, Pending: []PendingJob{{Job: build.Job("j").GPUs(2).Obj()}},
		Suspects: []health.Suspect{{Node: "r0-n-0", Rejections: 3, Until: t0.Add(time.Hour)}}}
	if got := outcomeOf(New(Config{}).Cycle(snap), "j"); got.Placed {
		t.Errorf("job placed on the only node, which is suspect: %+v", got)
	}
}

func TestSparesAreForReplacementsOnly(t *testing.T) {
	w := newHealthWorld(t, gang("g"), "r0-n-0", "r0-n-1")
	spares := []health.Spare{{Level: "rack", GPUs: 8}}
	eng := New(Config{Policy: Corral})
	// An ordinary 8-GPU job: r0's last node is r0's spare, so it goes to r1.
	p := eng.Cycle(&Snapshot{State: w.s, Running: []RunningJob{w.run}, Spares: spares, Now: t0,
		Pending: []PendingJob{{Job: build.Job("o").GPUs(8).Obj()}}})
	if got := outcomeOf(p, "o"); len(got.Nodes) != 1 || !strings.HasPrefix(got.Nodes[0], "r1-") {
		t.Errorf("ordinary job went to %v, want rack r1 (r0's free node is its spare)", got.Nodes)
	}
	if p.Stats.SpareGPUsHeld != 16 {
		t.Errorf("held %d spare GPUs, want 16 (8 per rack)", p.Stats.SpareGPUsHeld)
	}
	// A failure in r0: the spare takes the replacement.
	f := w.failDevice(t, "r0-n-1", 5)
	p1 := eng.Cycle(&Snapshot{State: w.s, Running: []RunningJob{w.run}, Spares: spares, Failures: []health.Failure{f}, Now: t0})
	if diff := cmp.Diff([]remediation{{Action: workload.ReplaceRanks, Evicted: []string{"g/0-1"}, Domain: "r0"}}, remediationOf(p1)); diff != "" {
		t.Fatalf("remediation (-want +got):\n%s", diff)
	}
	w.apply(t, p1)
	r := p1.Remediations[0]
	p2 := eng.Cycle(&Snapshot{State: w.s, Running: []RunningJob{w.run}, Spares: spares, Failures: []health.Failure{f}, Now: t0,
		Pending: []PendingJob{{Job: w.run.Job, Waiting: r.Pods, Within: Pin{Level: r.Level, Domain: r.Domain}}}})
	if got := outcomeOf(p2, "g"); !got.Placed || got.Domain != "r0-n-2" {
		t.Errorf("replacement %+v, want on the spare node r0-n-2", got)
	}
}

func TestPartlyBoundGangJoinsItsRequiredDomain(t *testing.T) {
	job := build.Job("g").Pods(2).GPUs(8).Required("rack").Obj()
	w := newHealthWorld(t, job, "r1-n-0", "r1-n-1")
	// Only pod 0 is bound; r0 is empty and would be the best fit for one pod
	// otherwise, since r1 is fuller... the rest must still join r1.
	w.s.Release(w.run.Pods[1].NodeIndex, w.run.Pods[1].Alloc)
	w.run.Pods = w.run.Pods[:1]
	w.fillNode(t, "r0-n-0")
	p := New(Config{}).Cycle(&Snapshot{State: w.s, Running: []RunningJob{w.run}, Now: t0,
		Pending: []PendingJob{{Job: job, Waiting: []workload.PodRef{{Job: "g", PodSet: 0, Index: 1}}}}})
	if got := outcomeOf(p, "g"); !got.Placed || !strings.HasPrefix(got.Domain, "r1-") {
		t.Errorf("rest of the gang %+v, want inside rack r1", got)
	}
}

func TestReplacementWithoutRoomRestartsTheGang(t *testing.T) {
	w := newHealthWorld(t, gang("g"), "r0-n-0", "r0-n-1")
	f := w.failDevice(t, "r0-n-0", 3)
	eng := New(Config{Policy: Corral})
	p1 := eng.Cycle(&Snapshot{State: w.s, Running: []RunningJob{w.run}, Failures: []health.Failure{f}, Now: t0})
	w.apply(t, p1)
	r := p1.Remediations[0]
	// Before the new pod exists, another job takes the rack's last node.
	w.fillNode(t, "r0-n-2")
	p2 := eng.Cycle(&Snapshot{State: w.s, Running: []RunningJob{w.run}, Failures: []health.Failure{f}, Now: t0,
		Pending: []PendingJob{{Job: w.run.Job, Waiting: r.Pods, Within: Pin{Level: r.Level, Domain: r.Domain}}}})
	if diff := cmp.Diff([]remediation{{Action: workload.RestartGang, Evicted: []string{"g/0-1"}}}, remediationOf(p2)); diff != "" {
		t.Errorf("remediation (-want +got):\n%s", diff)
	}
	if got := outcomeOf(p2, "g"); got.Placed {
		t.Errorf("replacement placed outside its rack: %+v", got)
	}
}

func TestGangSpanningRacksKeepsItsReplacementInItsRacks(t *testing.T) {
	// Three pods: two in r0, one in r1. r0 is then full; r1 has room, and so
	// has the cluster's third rack. The replacement of a failed r0 rank goes
	// to r1, a rack the gang already occupies, not to r2.
	job := build.Job("g").Pods(3).GPUs(8).Obj()
	s := build.State(build.Topo("rack"), build.Racks(3, 2))
	w := newHealthWorldOn(t, s, job, "r0-n-0", "r0-n-1", "r1-n-0")
	f := w.failDevice(t, "r0-n-1", 2)
	p := New(Config{}).Cycle(&Snapshot{State: s, Running: []RunningJob{w.run}, Failures: []health.Failure{f}, Now: t0})
	if diff := cmp.Diff([]remediation{{Action: workload.ReplaceRanks, Evicted: []string{"g/0-1"}, Domain: "r1"}}, remediationOf(p)); diff != "" {
		t.Errorf("remediation (-want +got):\n%s", diff)
	}
}
