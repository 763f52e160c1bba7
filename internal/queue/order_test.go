package queue

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/workload"
)

func TestOrder(t *testing.T) {
	fair := map[string]Amounts{
		"a": {h100: gpus(10), CPU: 1000},
		"b": {h100: gpus(10), CPU: 1000},
		"c": {h100: gpus(10), CPU: 1000},
	}
	cases := map[string]struct {
		specs []Spec
		usage map[string]Amounts
		want  []string
	}{
		"lowest dominant share first": {
			specs: specs(q("a"), q("b"), q("c")),
			usage: map[string]Amounts{
				"a": {h100: gpus(5), CPU: 900}, // cpu dominates: 0.9
				"b": {h100: gpus(6)},           // 0.6
				"c": {CPU: 100},                // 0.1
			},
			want: []string{"c", "b", "a"},
		},
		"under all its guarantees first, whatever its share": {
			specs: specs(q("a").Guarantee(h100, gpus(8)), q("b"), q("c").Guarantee(h100, gpus(4)).Guarantee(CPU, 500)),
			usage: map[string]Amounts{
				"a": {h100: gpus(7), CPU: 1000}, // below its only guarantee: cpu does not count
				"b": {},
				"c": {h100: gpus(1), CPU: 500}, // at its cpu guarantee: not under all
			},
			want: []string{"a", "b", "c"},
		},
		"equal shares: priority, then name": {
			specs: specs(q("c").Priority(1), q("b"), q("a")),
			usage: map[string]Amounts{"a": {h100: gpus(2)}, "b": {h100: gpus(2)}, "c": {h100: gpus(2)}},
			want:  []string{"c", "a", "b"},
		},
		"usage without a fair share goes last": {
			specs: specs(q("a"), q("b"), q("c")),
			usage: map[string]Amounts{"a": {"example.com/fpga": 1}, "b": {h100: gpus(10)}},
			want:  []string{"c", "b", "a"},
		},
		"leaves only": {
			specs: specs(q("org"), q("b").Parent("org"), q("a")),
			want:  []string{"a", "b"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tree, problems := Build(tc.specs)
			if len(problems) > 0 {
				t.Fatalf("Build: %v", problems)
			}
			if diff := cmp.Diff(tc.want, tree.Order(tc.usage, fair)); diff != "" {
				t.Errorf("Order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	tree, _ := Build(specs(
		q("org").Guarantee(h100, gpus(8)),
		q("a").Parent("org").Guarantee(h100, gpus(4)).Limit(h100, gpus(20)),
		q("b").Parent("org"),
	))
	usage := map[string]Amounts{"a": {h100: gpus(6), CPU: 100}, "b": {h100: gpus(4)}}
	fair := tree.FairShare(Amounts{h100: gpus(16), CPU: 1000}, usage)
	want := []QueueStatus{
		{Queue: "org", Parent: "root", Guarantee: Amounts{h100: gpus(8)},
			Allocated: Amounts{h100: gpus(10), CPU: 100}, FairShare: Amounts{h100: gpus(10), CPU: 100},
			Borrowed: Amounts{h100: gpus(2), CPU: 100}},
		{Queue: "a", Parent: "org", Leaf: true, Guarantee: Amounts{h100: gpus(4)}, Limit: Amounts{h100: gpus(20)},
			Allocated: Amounts{h100: gpus(6), CPU: 100}, FairShare: Amounts{h100: gpus(6), CPU: 100},
			Borrowed: Amounts{h100: gpus(2), CPU: 100}},
		{Queue: "b", Parent: "org", Leaf: true, Guarantee: Amounts{},
			Allocated: Amounts{h100: gpus(4)}, FairShare: Amounts{h100: gpus(4)}, Borrowed: Amounts{h100: gpus(4)}},
	}
	if diff := cmp.Diff(want, tree.Status(usage, fair)); diff != "" {
		t.Errorf("Status (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Amounts{h100: 2}, Borrowed(Amounts{h100: 10, CPU: 1}, Amounts{h100: 8, CPU: 4})); diff != "" {
		t.Errorf("Borrowed (-want +got):\n%s", diff)
	}
}

func TestOrderJobs(t *testing.T) {
	t0 := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	job := func(id string, prio int32, submitted time.Duration) *workload.Job {
		return &workload.Job{ID: workload.JobID(id), Priority: prio, Submit: t0.Add(submitted)}
	}
	cases := map[string]struct {
		jobs  []*workload.Job
		now   time.Time
		aging time.Duration
		want  []int
	}{
		"priority, then submit time, then id": {
			jobs: []*workload.Job{job("c", 0, 0), job("b", 0, 0), job("a", 0, time.Minute), job("d", 5, time.Hour)},
			now:  t0.Add(2 * time.Hour),
			want: []int{3, 1, 0, 2},
		},
		"aging: a job that waited 6 periods passes a new priority-5 job": {
			jobs:  []*workload.Job{job("new", 5, 6*time.Hour), job("old", 0, 0)},
			now:   t0.Add(6 * time.Hour),
			aging: time.Hour,
			want:  []int{1, 0},
		},
		"aging: 4 periods are not enough against priority 5": {
			jobs:  []*workload.Job{job("new", 5, 4*time.Hour), job("old", 0, 0)},
			now:   t0.Add(4 * time.Hour),
			aging: time.Hour,
			want:  []int{0, 1},
		},
		"a job from the future does not age backwards": {
			jobs:  []*workload.Job{job("later", 1, 10*time.Hour), job("now", 0, 0)},
			now:   t0,
			aging: time.Hour,
			want:  []int{0, 1},
		},
		"equal jobs keep input order; nil last": {
			jobs: []*workload.Job{nil, job("x", 0, 0), job("x", 0, 0)},
			now:  t0,
			want: []int{1, 2, 0},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, OrderJobs(tc.jobs, tc.now, tc.aging)); diff != "" {
				t.Errorf("OrderJobs (-want +got):\n%s", diff)
			}
		})
	}
	if got := EffectivePriority(job("x", math.MaxInt32, 0), t0.Add(math.MaxInt64), time.Nanosecond); got != math.MaxInt64 {
		t.Errorf("aging saturates: got %d", got)
	}
}
