package cycle

import (
	"math"
	"testing"
	"time"
)

func TestCheckpointsAdd(t *testing.T) {
	t0 := time.Unix(1_000_000, 0).UTC()
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	var c Checkpoints
	for _, m := range []int{10, 10, 5, 20} { // a repeat and an older value are no new checkpoint
		c = c.Add(at(m))
	}
	c = c.Add(time.Time{})
	if len(c) != 2 || !c[0].Equal(at(10)) || !c.Last().Equal(at(20)) {
		t.Fatalf("reports %v, want 10 and 20 min", c)
	}
	before := c
	for i := 0; i <= MaxCheckpoints+4; i++ {
		c = c.Add(at(30 + 10*i)) // up to 230 min
	}
	if len(c) != MaxCheckpoints || !c[0].Equal(at(230-10*(MaxCheckpoints-1))) || len(before) != 2 || !before.Last().Equal(at(20)) {
		t.Errorf("bounded: %d kept from %v; the earlier value changed to %v", len(c), c[0], before)
	}
	if got := c.Within(at(95), at(120)); len(got) != 3 || !got[0].Equal(at(100)) || !got.Last().Equal(at(120)) {
		t.Errorf("Within(95, 120 min) = %v, want 100..120", got)
	}
	if got := c.Within(at(500), at(600)); got != nil {
		t.Errorf("Within past the last report = %v, want none", got)
	}
}

func TestCheckpointsPredict(t *testing.T) {
	t0 := time.Unix(1_000_000, 0).UTC()
	reports := func(mins ...float64) Checkpoints {
		var c Checkpoints
		for _, m := range mins {
			c = c.Add(t0.Add(time.Duration(m * float64(time.Minute))))
		}
		return c
	}
	cases := []struct {
		name       string
		c          Checkpoints
		wantOK     bool
		next, mean float64 // minutes
		spread     float64 // NaN: unknown
		intervals  int
	}{
		{name: "none"},
		{name: "one report: no interval", c: reports(30)},
		{name: "one interval: spread unknown", c: reports(30, 60), wantOK: true, next: 90, mean: 30, spread: math.NaN(), intervals: 1},
		{name: "regular", c: reports(30, 60, 90), wantOK: true, next: 120, mean: 30, spread: 0, intervals: 2},
		// intervals 40, 10, 40: mean 30, sample deviation sqrt(300) min.
		{name: "irregular", c: reports(10, 50, 60, 100), wantOK: true, next: 130, mean: 30, spread: math.Sqrt(300) / 30, intervals: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := tc.c.Predict()
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if !ok {
				return
			}
			min := func(m float64) time.Duration { return time.Duration(m * float64(time.Minute)) }
			if !p.Next.Equal(t0.Add(min(tc.next))) || p.Mean != min(tc.mean) || p.Intervals != tc.intervals {
				t.Errorf("got next %v mean %v over %d, want %v min, %v min, %d", p.Next.Sub(t0), p.Mean, p.Intervals, tc.next, tc.mean, tc.intervals)
			}
			if math.IsNaN(tc.spread) != math.IsNaN(p.Spread) || (!math.IsNaN(tc.spread) && math.Abs(p.Spread-tc.spread) > 1e-9) {
				t.Errorf("spread %v, want %v", p.Spread, tc.spread)
			}
		})
	}
}
