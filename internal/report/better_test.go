package report

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/metrics"
)

func TestMarkBest(t *testing.T) {
	cases := map[string]struct {
		head string
		in   []string
		want []string
	}{
		"lower wins, durations":  {"wait\np95", []string{"1h02m", "45s", "3d04h"}, []string{"1h02m ", "45s*", "3d04h "}},
		"higher wins, ± ignored": {"util\n%", []string{"85.0 ± 7.1", "90.0 ± 1.0"}, []string{"85.0 ± 7.1 ", "90.0 ± 1.0*"}},
		"ties share the mark":    {"evictions", []string{"0.0", "0.0", "2.0"}, []string{"0.0*", "0.0*", "2.0 "}},
		"all tie: no mark":       {"evictions", []string{"1.0", "1.0"}, []string{"1.0", "1.0"}},
		"markers never win":      {"JCT\nmean", []string{none, never, "2h04m", "1h00m"}, []string{none + " ", never + " ", "2h04m ", "1h00m*"}},
		"one figure: no mark":    {"Jain", []string{notApplicable, "0.900"}, []string{notApplicable, "0.900"}},
		"no direction: no mark":  {"never\nfit", []string{"3", "0"}, []string{"3", "0"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := section{Header: []string{"policy", tc.head}}
			for _, v := range tc.in {
				s.Rows = append(s.Rows, []string{"p", v})
			}
			markBest(&s)
			var got []string
			for _, r := range s.Rows {
				got = append(got, r[1])
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("cells (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNoneAndNotApplicable: a run where no job started shows "none" for
// its waits, not a 0s that would read as the best wait; a run without
// queues shows "n/a" for fairness.
func TestNoneAndNotApplicable(t *testing.T) {
	c, err := compare([]metrics.Result{
		result("corral").Protocol("replay").Sum(func(s *metrics.Summary) { s.JobsStarted, s.Evictions = 0, 1 }).Obj(),
	})
	if err != nil {
		t.Fatal(err)
	}
	g := buildGrid(c)
	if got := g.Sections[0].Rows[0][3]; got != never { // after useful and alloc
		t.Errorf("wait p50 with no job started: %q, want %q", got, never)
	}
	last := g.Sections[len(g.Sections)-1]
	if got := last.Rows[0][4]; got != notApplicable {
		t.Errorf("Jain without queues: %q, want %q (header %q)", got, notApplicable, last.Header[4])
	}
}

// TestPartialWaitsNeverBest is the case in the table: a policy that
// started few jobs quickly shows short waits, marked †, and does not take
// the best mark from one that started every job.
func TestPartialWaitsNeverBest(t *testing.T) {
	c, err := compare([]metrics.Result{
		result("corral").Replay(3600, 7200, 9000, 300).Obj(),
		result("spread").Replay(60, 120, 600, 105).Sum(func(s *metrics.Summary) { s.JobsSubmitted, s.JobsStillPending = 300, 195 }).Obj(),
	})
	if err != nil {
		t.Fatal(err)
	}
	rows := buildGrid(c).Sections[0].Rows
	if diff := cmp.Diff([]string{"1h00m", "2h00m", "2h30m"}, rows[0][3:6]); diff != "" {
		t.Errorf("corral waits (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"1m00s†", "2m00s†", "10m00s†"}, rows[1][3:6]); diff != "" {
		t.Errorf("spread waits (-want +got):\n%s", diff)
	}
}
