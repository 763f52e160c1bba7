package report

import (
	"math"
	"strings"
	"testing"
)

func runsOf(name string, lost ...float64) SeedRuns {
	r := SeedRuns{Name: name, Runs: map[int64]map[string]float64{}}
	for i, v := range lost {
		r.Runs[int64(42+i)] = map[string]float64{"failure_lost_gpu_hours": v}
	}
	return r
}

func TestPaired(t *testing.T) {
	base := runsOf("base", 100, 200, 300)
	got, err := Paired("failure_lost_gpu_hours", base, runsOf("better", 70, 150, 200), runsOf("short", 90))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Change != 0 || got[0].Lower != 0 {
		t.Fatalf("baseline row %+v", got)
	}
	b := got[1]
	// 420 / 600 - 1 = -30%; differences -30, -50, -100.
	if math.Abs(b.Change+0.3) > 1e-9 || b.Lower != 3 || b.Seeds != 3 || math.Abs(b.Mean-140) > 1e-9 {
		t.Errorf("better row %+v", b)
	}
	if want := -60 / (36.0555127546 / math.Sqrt(3)); math.Abs(b.T-want) > 1e-6 {
		t.Errorf("t = %v, want %v", b.T, want)
	}
	if s := got[2]; s.Seeds != 1 || s.T != 0 || math.Abs(s.Change+0.1) > 1e-9 {
		t.Errorf("one shared seed: %+v", s)
	}
	if _, err := Paired("no_such_key", base, runsOf("x", 1)); err == nil || !strings.Contains(err.Error(), "no_such_key") {
		t.Errorf("unknown metric: %v", err)
	}
	other := SeedRuns{Name: "other", Runs: map[int64]map[string]float64{7: {"failure_lost_gpu_hours": 1}}}
	if _, err := Paired("failure_lost_gpu_hours", base, other); err == nil {
		t.Error("a row sharing no seed compared without error")
	}
}

func TestReadSeedRuns(t *testing.T) {
	doc := `{"policies":{"corral":{"mean":{},"runs":[{"seed":42,"failures":3,"remediations":{"RestartGang":1}},{"seed":43}]}}}`
	r, err := ReadSeedRuns(strings.NewReader(doc), "a.json", "corral")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Runs) != 2 || r.Runs[42]["failures"] != 3 {
		t.Errorf("runs %+v", r.Runs)
	}
	two := `{"policies":{"corral":{"runs":[{"seed":42}]},"spread":{"runs":[{"seed":42}]}}}`
	if _, err := ReadSeedRuns(strings.NewReader(two), "a.json", "fifo"); err == nil || err.Error() != `a.json: no policy "fifo" (it has corral, spread)` {
		t.Errorf("unknown policy: %v", err)
	}
	if _, err := ReadSeedRuns(strings.NewReader("{"), "bad.json", "corral"); err == nil {
		t.Error("malformed JSON read without error")
	}
}
