package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jedib0t/go-pretty/v6/text"

	"github.com/corral-dev/corral/internal/metrics"
)

func TestGridColumnsPerProtocol(t *testing.T) {
	locality := func(s *metrics.Summary) {
		s.MultiNodeGangs = 3
		s.MinDomainShare = map[string]float64{"spine": 1, "rack": 0.5}
	}
	fgdHeader := []string{"policy", "unalloc\n@100% ↓", "unalloc\n@110% ↓", "unalloc\n@120% ↓", "unalloc\n@130% ↓", "frag\n% ↓", "decision\nµs/pod ↓"}
	timeHeader := []string{"policy", "useful\n% ↑", "alloc\n%", "wait\np50 ↓", "wait\np95 ↓", "wait\nmax ↓", "JCT\nmean ↓",
		"jobs\ndone ↑", "never\nfit", "still\npending ↓"}
	// Shown when some run has one: a simulation never raises a limit.
	overLimitHeader := []string{"policy", "useful\n% ↑", "alloc\n%", "wait\np50 ↓", "wait\np95 ↓", "wait\nmax ↓", "JCT\nmean ↓",
		"jobs\ndone ↑", "never\nfit", "over\nlimit", "still\npending ↓"}
	wholeHeader := []string{"policy", "makespan ↓", "useful\n% ↑", "work\n% ↑", "alloc\n%", "wait mean\ncens. ↓", "wait p95\ncens. ↓",
		"JCT\np95 ↓", "partial\ngangs ↓", "rdzv\nfailed ↓"}
	sizes := func(s *metrics.Summary) {
		s.SizeClasses = []metrics.SizeClass{{Class: "<=1", Jobs: 1}, {Class: ">64", Jobs: 1}}
	}
	cases := map[string]struct {
		results []metrics.Result
		want    [][]string // each section's header
	}{
		"fgd": {
			results: []metrics.Result{result("corral").Obj(), result("spread").Obj()},
			want:    [][]string{fgdHeader},
		},
		"replay without topology figures": {
			results: []metrics.Result{result("corral").Protocol("replay").Obj()},
			want:    [][]string{timeHeader, wholeHeader},
		},
		"replay with jobs over their queue's limit": {
			results: []metrics.Result{
				result("corral").Protocol("replay").Sum(func(s *metrics.Summary) { s.JobsOverQueueLimit = 2 }).Obj(),
				result("kube").Protocol("replay").Obj(),
			},
			want: [][]string{overLimitHeader, wholeHeader},
		},
		"replay with job sizes": {
			results: []metrics.Result{result("corral").Protocol("replay").Sum(sizes).Obj()},
			want:    [][]string{timeHeader, wholeHeader, {"policy", "<=1", ">64"}, {"policy", "<=1", ">64"}},
		},
		"trace with topology levels, sorted": {
			results: []metrics.Result{
				result("corral").Protocol("trace").Sum(locality).Obj(),
				result("binpack").Protocol("trace").Sum(func(s *metrics.Summary) {
					s.MinDomainShare = map[string]float64{"block": 1}
				}).Obj(),
			},
			want: [][]string{timeHeader, wholeHeader, {"policy", "multi-node\ngangs", "block\nmin-dom % ↑", "rack\nmin-dom % ↑",
				"spine\nmin-dom % ↑", "PCIe\nmin % ↑", "comm\nslowdown ↓"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := compare(tc.results)
			if err != nil {
				t.Fatal(err)
			}
			var got [][]string
			for _, s := range buildGrid(c).Sections {
				got = append(got, s.Header)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGridMeansOverSeeds(t *testing.T) {
	cases := map[string]struct {
		results []metrics.Result
		section int
		want    [][]string
	}{
		"fgd: one seed has no ± sd": {
			results: []metrics.Result{result("corral").Unalloc(1, 2, 3, 4.5).Sum(func(s *metrics.Summary) {
				s.FragPct, s.DecisionMeanUS = 2.345, 120.04
			}).Obj()},
			want: [][]string{{"corral", "1.00", "2.00", "3.00", "4.50", "2.35", "120.0"}},
		},
		"fgd: mean ± sd over two seeds, policies in input order": {
			results: []metrics.Result{
				result("spread").Seed(43).Unalloc(2, 4, 6, 8).Obj(),
				result("corral").Seed(43).Unalloc(1, 2, 3, 6).Obj(),
				result("corral").Seed(42).Unalloc(1, 2, 3, 4).Obj(),
				result("spread").Seed(42).Unalloc(2, 4, 6, 8).Obj(),
			},
			want: [][]string{
				// The best of each column is marked, the others padded to keep
				// digits in line; columns where all tie are not marked.
				{"spread", "2.00 ± 0.00 ", "4.00 ± 0.00 ", "6.00 ± 0.00 ", "8.00 ± 0.00 ", "0.00", "0.0"},
				{"corral", "1.00 ± 0.00*", "2.00 ± 0.00*", "3.00 ± 0.00*", "5.00 ± 1.41*", "0.00", "0.0"},
			},
		},
		"fgd: a checkpoint no run reached": {
			results: []metrics.Result{result("corral").Sum(func(s *metrics.Summary) {
				s.UnallocatedAt = map[string]float64{"100": 1.5}
			}).Obj()},
			want: [][]string{{"corral", "1.50", "–", "–", "–", "0.00", "0.0"}},
		},
		"replay: durations, fractional job means": {
			results: []metrics.Result{
				result("corral").Seed(1).Replay(30, 3600, 90000, 12).Sum(func(s *metrics.Summary) {
					s.UtilizationPct, s.JCTMeanS, s.PartialGangs = 80, 7440, 1
				}).Obj(),
				result("corral").Seed(2).Replay(60, 3840, 90000, 13).Sum(func(s *metrics.Summary) {
					s.UtilizationPct, s.JCTMeanS, s.JobsStillPending = 90, 7440, 4
				}).Obj(),
			},
			// Seed 2 left 4 jobs pending: its waits leave them out (†).
			want: [][]string{{"corral", "85.0 ± 7.1", "0.0", "45s†", "1h02m†", "1d01h†", "2h04m", "12.5", "0", "2"}},
		},
		"replay: min-domain share over the runs that have the level": {
			results: []metrics.Result{
				result("corral").Seed(1).Protocol("replay").Sum(func(s *metrics.Summary) {
					s.MultiNodeGangs, s.MinPCIeShare, s.CommSlowdownMean = 4, 0.5, 1.25
					s.MinDomainShare = map[string]float64{"rack": 0.5, "spine": 1}
				}).Obj(),
				result("corral").Seed(2).Protocol("replay").Sum(func(s *metrics.Summary) {
					s.MultiNodeGangs, s.MinPCIeShare, s.CommSlowdownMean = 2, 1, 1.5
					s.MinDomainShare = map[string]float64{"rack": 0.75}
				}).Obj(),
			},
			section: 2,
			want:    [][]string{{"corral", "3", "62.5", "100.0", "75.0", "1.375"}},
		},
		"replay: whole run and size classes": {
			results: []metrics.Result{
				result("corral").Seed(1).Protocol("replay").Sum(func(s *metrics.Summary) {
					s.MakespanS, s.UtilizationMakespanPct, s.AllocatedMakespanPct, s.PartialGangs, s.RendezvousFailures = 86400, 40, 90, 2, 7
					s.WorkMakespanPct = 37.5
					s.SizeClasses = []metrics.SizeClass{{Class: "2-8", Jobs: 3, WaitMeanS: 60, WaitP95S: 120}}
				}).Obj(),
			},
			section: 1,
			want:    [][]string{{"corral", "1d00h", "40.0", "37.5", "90.0", "0s", "0s", "0s", "2", "7"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := compare(tc.results)
			if err != nil {
				t.Fatal(err)
			}
			got := buildGrid(c).Sections[tc.section].Rows
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTableText(t *testing.T) {
	policies := []string{"corral", "spread", "binpack"}
	cases := map[string]struct {
		protocol string
		want     []string // substrings of the output
		notWant  []string
	}{
		"fgd": {
			protocol: "fgd",
			want:     []string{"cluster openb · trace default · protocol fgd · seeds 42–44 (mean of 3)", "@130%", "µs/pod", "±"},
			notWant:  []string{"wait", "PCIe"},
		},
		"replay": {
			protocol: "replay",
			want:     []string{"protocol replay", "Time and jobs", "Placement locality", "p95", "pending", "spine", "slowdown"},
			notWant:  []string{"@100%"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var results []metrics.Result
			for i, p := range policies {
				for seed := int64(42); seed < 45; seed++ {
					results = append(results, synthetic(p, seed, tc.protocol, 1-0.3*float64(i)))
				}
			}
			var b bytes.Buffer
			if err := Table(&b, results); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			for _, s := range append(tc.want, policies...) {
				if !strings.Contains(out, s) {
					t.Errorf("table lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tc.notWant {
				if strings.Contains(out, s) {
					t.Errorf("table has %q:\n%s", s, out)
				}
			}
			for _, l := range strings.Split(out, "\n") {
				if w := text.StringWidthWithoutEscSequences(l); w > 100 {
					t.Errorf("line is %d columns wide, want at most 100:\n%s", w, l)
				}
			}
		})
	}
}

// TestTableRightAligned checks that figures of different widths end in the
// same column.
func TestTableRightAligned(t *testing.T) {
	results := []metrics.Result{
		result("corral").Replay(1, 1, 1, 7).Obj(),
		result("spread").Replay(1, 1, 1, 12345).Obj(),
	}
	var b bytes.Buffer
	if err := Table(&b, results); err != nil {
		t.Fatal(err)
	}
	end := map[string]int{}
	for _, l := range strings.Split(b.String(), "\n") {
		// The digits line up; the best mark hangs after them.
		for p, v := range map[string]string{"corral": " 7", "spread": " 12345"} {
			if strings.Contains(l, p+" ") && strings.Contains(l, v) { // the jobs section's row
				end[p] = text.StringWidthWithoutEscSequences(l[:strings.Index(l, v)+len(v)])
			}
		}
	}
	if end["corral"] == 0 || end["corral"] != end["spread"] {
		t.Errorf("jobs done end at columns %v, want equal:\n%s", end, b.String())
	}
}

func TestInvalidInput(t *testing.T) {
	cases := map[string]struct {
		results []metrics.Result
		want    string
	}{
		"no results":      {want: "no results"},
		"mixed protocols": {results: []metrics.Result{result("corral").Obj(), result("spread").Protocol("replay").Obj()}, want: "different inputs"},
		"mixed traces":    {results: []metrics.Result{result("corral").Obj(), result("spread").Trace("other").Obj()}, want: "different inputs"},
		"duplicate run":   {results: []metrics.Result{result("corral").Obj(), result("corral").Obj()}, want: `policy "corral" with seed 42`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			writers := map[string]func() error{
				"Table":     func() error { return Table(&bytes.Buffer{}, tc.results) },
				"WriteJSON": func() error { return WriteJSON(&bytes.Buffer{}, tc.results) },
				"WriteHTML": func() error { return WriteHTML(&bytes.Buffer{}, tc.results, Meta{}) },
			}
			for fn, write := range writers {
				if err := write(); err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: error %v, want one containing %q", fn, err, tc.want)
				}
			}
		})
	}
}

func TestHumanDuration(t *testing.T) {
	cases := map[float64]string{
		0: "0s", 0.01: "<0.1s", 0.44: "0.4s", 5: "5s", 9.96: "10s", 45.4: "45s", 59.6: "1m00s",
		725: "12m05s", 3599.6: "1h00m", 3720: "1h02m", 86369: "23h59m", 86399: "1d00h",
		90000: "1d01h", 3*86400 + 4*3600: "3d04h", -1: "–",
	}
	for in, want := range cases {
		if got := humanDuration(in); got != want {
			t.Errorf("humanDuration(%v) = %q, want %q", in, got, want)
		}
	}
}
