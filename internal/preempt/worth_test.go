package preempt

import (
	"strings"
	"testing"
	"time"
)

func TestWorthEvicting(t *testing.T) {
	h := time.Hour
	gpuH := func(x float64) float64 { return x * 3600 }
	cases := map[string]struct {
		gpus    float64
		runtime time.Duration // the preemptor's expected runtime (0: nothing predicts it)
		room    time.Duration // when room frees without evicting (0: nothing predicts it)
		victims []Ending
		want    bool
	}{
		"a short job may not throw away more than twice its work, however long it would wait": {
			gpus: 256, runtime: 24 * time.Minute,
			victims: []Ending{{Cost: gpuH(1070), Left: 34 * h, Known: true}, {Cost: gpuH(282), Left: 70 * h, Known: true}},
		},
		"nor when the victims' end is unknown": {
			gpus: 256, runtime: 24 * time.Minute,
			victims: []Ending{{Cost: gpuH(1070)}},
		},
		"at most twice its work: the wait decides": {
			gpus: 256, runtime: 24 * time.Minute,
			victims: []Ending{{Cost: gpuH(200), Left: 34 * h, Known: true}},
			want:    true,
		},
		"a long job may": {
			gpus: 256, runtime: 10 * h,
			victims: []Ending{{Cost: gpuH(1070), Left: 34 * h, Known: true}, {Cost: gpuH(282), Left: 70 * h, Known: true}},
			want:    true,
		},
		"a victim minutes from its end after a week without a checkpoint: wait": {
			gpus:    1024,
			victims: []Ending{{Cost: gpuH(8 * 167.9), Left: 6 * time.Minute, Known: true}},
		},
		"the same victim with a day to go: evict": {
			gpus:    1024,
			victims: []Ending{{Cost: gpuH(8 * 167.9), Left: 24 * h, Known: true}},
			want:    true,
		},
		"a cheap victim that ends soon: evict": {
			gpus:    64,
			victims: []Ending{{Cost: gpuH(2), Left: 10 * time.Minute, Known: true}},
			want:    true,
		},
		"the last victim to end sets the wait": {
			gpus: 16,
			victims: []Ending{
				{Cost: gpuH(100), Left: time.Minute, Known: true},
				{Cost: gpuH(20), Left: 10 * h, Known: true},
			},
			want: true,
		},
		"costs add up over the victims": {
			gpus: 16,
			victims: []Ending{
				{Cost: gpuH(100), Left: 5 * h, Known: true},
				{Cost: gpuH(100), Left: 5 * h, Known: true},
			},
		},
		"an end nothing predicts leaves the priority to decide": {
			gpus: 1,
			victims: []Ending{
				{Cost: gpuH(500), Left: time.Minute, Known: true},
				{Cost: gpuH(500)},
			},
			want: true,
		},
		"room frees elsewhere sooner than the victims end: the eviction buys only that wait": {
			gpus:    32,
			room:    2 * h,
			victims: []Ending{{Cost: gpuH(944), Left: 50 * h, Known: true}},
		},
		"room frees elsewhere only later than the victims end: the victims' end sets the wait": {
			gpus:    32,
			room:    100 * h,
			victims: []Ending{{Cost: gpuH(944), Left: 20 * h, Known: true}},
		},
		"an end nothing predicts, but room frees soon elsewhere: wait": {
			gpus:    8,
			room:    time.Hour,
			victims: []Ending{{Cost: gpuH(500)}},
		},
		"room frees soon, but the victims lose little: evict": {
			gpus:    64,
			room:    time.Hour,
			victims: []Ending{{Cost: gpuH(10), Left: 50 * h, Known: true}},
			want:    true,
		},
		"room free now contradicts the failed placement: ignored, the victims' end decides": {
			gpus:    32,
			room:    -1, // RoomKnown, zero wait
			victims: []Ending{{Cost: gpuH(100), Left: 50 * h, Known: true}},
			want:    true,
		},
		"no cost: evict": {
			gpus:    8,
			victims: []Ending{{Left: 0, Known: true}},
			want:    true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := Preemptor{GPUs: tc.gpus, Runtime: tc.runtime, Room: max(tc.room, 0), RoomKnown: tc.room != 0}
			got, why := WorthEvicting(p, tc.victims, DefaultMaxLostPerWork)
			if got != tc.want {
				t.Fatalf("WorthEvicting = %v (%q), want %v", got, why, tc.want)
			}
			if !got && !strings.Contains(why, "not worth it") {
				t.Errorf("why %q does not say it is not worth it", why)
			}
		})
	}
}

// TestWorthEvictingMaxLostPerWork: the bound on lost work is the
// operator's factor (Config.MaxLostPerWork), printed in the reason; not
// positive, no bound, and the wait alone decides. The preemptor is the
// 24-minute 256-GPU job of the queues workload: 102 GPU-hours of work.
// Its victims would run on for 34 hours, so waiting for them would cost
// far more than any of these evictions.
func TestWorthEvictingMaxLostPerWork(t *testing.T) {
	gpuH := func(x float64) float64 { return x * 3600 }
	p := Preemptor{GPUs: 256, Runtime: 24 * time.Minute}
	cases := map[string]struct {
		factor  float64
		lost    float64 // GPU-hours the victims would lose
		want    bool
		wantWhy string // when not worth it, a part of the reason
	}{
		"2× (the default) of 102 allows 150":     {factor: 2, lost: 150, want: true},
		"1× of 102 does not allow 150":           {factor: 1, lost: 150, wantWhy: "lose 150 GPU-hours, more than 1× the 102 GPU-hours it is expected to run"},
		"2× of 102 does not allow 250":           {factor: 2, lost: 250, wantWhy: "more than 2× the 102 GPU-hours"},
		"2.5× of 102 allows 250":                 {factor: 2.5, lost: 250, want: true},
		"1.5× is printed as it is":               {factor: 1.5, lost: 160, wantWhy: "more than 1.5× the 102 GPU-hours"},
		"2× does not allow the 1,352 of seed 44": {factor: 2, lost: 1352, wantWhy: "more than 2× the 102 GPU-hours"},
		"no bound (negative) allows it":          {factor: -1, lost: 1352, want: true},
		"no bound (zero) allows it":              {factor: 0, lost: 1352, want: true},
		"16× allows it":                          {factor: 16, lost: 1352, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			victims := []Ending{{Cost: gpuH(tc.lost), Left: 34 * time.Hour, Known: true}}
			got, why := WorthEvicting(p, victims, tc.factor)
			if got != tc.want {
				t.Fatalf("WorthEvicting(×%g) = %v (%q), want %v", tc.factor, got, why, tc.want)
			}
			if !got && !strings.Contains(why, tc.wantWhy) {
				t.Errorf("why %q does not say %q", why, tc.wantWhy)
			}
		})
	}
	// Without a bound the wait still decides: a victim that ends within
	// minutes is not evicted for a short job, whatever the factor.
	soon := []Ending{{Cost: gpuH(1352), Left: 6 * time.Minute, Known: true}}
	if ok, why := WorthEvicting(p, soon, -1); ok || !strings.Contains(why, "expected to end within 6m") {
		t.Errorf("WorthEvicting(no bound, victim ends in 6m) = %v, %q; want the wait to refuse it", ok, why)
	}
}
