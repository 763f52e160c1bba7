package report

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"

	"github.com/corral-dev/corral/internal/metrics"
)

// grid is the comparison both Table and WriteHTML render: a caption, then
// one or more sections of one row per policy.
type grid struct {
	Caption  string
	Sections []section
	Notes    []string // lines under the tables
}

// section is one table. Column 0 is the policy name; the others are right
// aligned figures. A header may hold "\n" to break it over two lines.
type section struct {
	Title  string
	Header []string
	Rows   [][]string // Rows[i][0] is the policy
}

// column is one figure of a section.
type column struct {
	Head string
	Cell func(runs []metrics.Result) string
}

// fgdCheckpoints are the arrived-% keys of Summary.UnallocatedAt the fgd
// protocol reports (DESIGN.md, Benchmarks).
var fgdCheckpoints = []string{"100", "110", "120", "130"}

// buildGrid chooses the columns for the protocol and fills one row per
// policy. fgd places pods once and never removes them, so it is judged on
// allocation; every other protocol replays jobs over time.
func buildGrid(c *comparison) grid {
	g := grid{Caption: c.caption()}
	multi := len(c.Seeds) > 1
	if strings.HasPrefix(c.Protocol, "fgd") {
		g.Sections = append(g.Sections, fill(c, "", fgdColumns()))
		g.Notes = append(g.Notes, "unalloc @N%: unallocated GPU % when GPU requests arrived first reach N% of capacity.")
		if multi {
			g.Notes = append(g.Notes, "± is the sample standard deviation over seeds.")
		}
		g.Notes = append(g.Notes, legendNotes...)
		return g
	}
	g.Sections = append(g.Sections, fill(c, "Time and jobs (useful and alloc % over the arrival window)", timeColumns(c)))
	g.Sections = append(g.Sections, fill(c, "Whole run (first submission to last event, drain included)", wholeRunColumns()))
	if wait, jct := sizeColumns(c); wait != nil {
		g.Sections = append(g.Sections, fill(c, "Wait by job size in GPUs, censored (mean / p95)", wait))
		g.Sections = append(g.Sections, fill(c, "JCT by job size in GPUs, completed jobs (mean / p95)", jct))
	}
	g.Notes = append(g.Notes,
		"useful %: GPUs of running jobs doing work; alloc %: GPUs held at all, including partly",
		"started gangs, hung jobs and rendezvous that never completed (rdzv failed: how often).",
		"work %: the completed jobs' GPUs × runtime at full speed / (GPUs × makespan), so that",
		"communication slowdown, rolled-back work and restart overhead do not count as work.",
		"wait p50/p95/max: jobs that started; cens. (censored): a job that never started counts",
		"with its wait until the end of the run.")
	if overQueueLimit(c) {
		g.Notes = append(g.Notes, "over limit: jobs that each ask more than their queue's limit alone; a simulation never raises",
			"it, so they could never start there (not counted as still pending; kube and kube-gang ignore limits).")
	}
	if loc := localityColumns(c); loc != nil {
		g.Sections = append(g.Sections, fill(c, "Placement locality", loc))
		g.Notes = append(g.Notes, "min-dom %: share of multi-node gangs in the fewest possible domains of that topology level.")
	}
	if q := preemptionColumns(c); q != nil {
		g.Sections = append(g.Sections, fill(c, "Queues and preemption", q))
		g.Notes = append(g.Notes, "GPU-h lost: work evictions threw away (since each job's last checkpoint); "+
			"Jain: fairness of queue allocation / fair share over time; late queue short: how long the queue that arrived last "+
			"first stayed under 95% of its fair share with jobs waiting.")
	}
	if failureRecorded(c) {
		g.Sections = append(g.Sections, fill(c, "Failures", failureColumns()))
		g.Notes = append(g.Notes, "lost GPU-h: work rolled back to checkpoints + restart overhead + GPUs held idle while failed ranks were replaced + GPUs held hung until the failure was acted on; recovery: failure to the job running whole again.")
	}
	if multi {
		g.Notes = append(g.Notes, "± is the sample standard deviation over seeds.")
	}
	g.Notes = append(g.Notes, legendNotes...)
	return g
}

// legendNotes explain the marks every table uses.
var legendNotes = []string{
	"↑ higher is better, ↓ lower is better; * (★ in HTML) marks the best figure of a column.",
	"n/a: does not apply (e.g. no queues); none: could have happened, did not (e.g. no job started).",
	"†: over the jobs that started (JCT: completed) only; others never did, so it is not comparable.",
}

// preemptionColumns are the queue and eviction figures, or nil when no run
// had queues or evicted anything.
func preemptionColumns(c *comparison) []column {
	found := false
	for _, p := range c.Policies {
		for _, r := range p.Runs {
			if r.Summary.Evictions > 0 || r.Summary.FairnessJain > 0 {
				found = true
			}
		}
	}
	if !found {
		return nil
	}
	num := func(head string, decimals int, f func(s metrics.Summary) float64) column {
		return column{head, func(rs []metrics.Result) string { return fixed(statOf(rs, field(f)), decimals, false) }}
	}
	return []column{
		num("evictions", 1, func(s metrics.Summary) float64 { return float64(s.Evictions) }),
		num("GPU-h lost\npreemption", 1, func(s metrics.Summary) float64 { return s.GPUHoursLostPreemption }),
		num("GPU-h lost\nconsolidation", 1, func(s metrics.Summary) float64 { return s.GPUHoursLostConsolidation }),
		{"Jain", func(rs []metrics.Result) string {
			if !anyRun(rs, func(s metrics.Summary) bool { return s.FairnessJain > 0 }) {
				return notApplicable // no queues: no fair share to be fair to
			}
			return fixed(statOf(rs, func(s metrics.Summary) (float64, bool) { return s.FairnessJain, s.FairnessJain > 0 }), 3, false)
		}},
		{"late queue\nshort", func(rs []metrics.Result) string {
			if !anyRun(rs, func(s metrics.Summary) bool { return s.LateQueue != "" }) {
				return notApplicable
			}
			if !anyRun(rs, func(s metrics.Summary) bool { return s.LateQueueToShareS >= 0 }) {
				return "never ended"
			}
			return duration(statOf(rs, func(s metrics.Summary) (float64, bool) {
				return s.LateQueueToShareS, s.LateQueueToShareS >= 0 && s.LateQueue != ""
			}))
		}},
	}
}

func failureRecorded(c *comparison) bool {
	for _, p := range c.Policies {
		for _, r := range p.Runs {
			if r.Summary.Failures > 0 {
				return true
			}
		}
	}
	return false
}

func failureColumns() []column {
	num := func(head string, digits int, f func(s metrics.Summary) float64) column {
		return column{head, func(rs []metrics.Result) string { return fixed(statOf(rs, field(f)), digits, false) }}
	}
	dur := func(head string, f func(s metrics.Summary) float64) column {
		return column{head, func(rs []metrics.Result) string { return duration(statOf(rs, field(f))) }}
	}
	return []column{
		num("failures", 0, func(s metrics.Summary) float64 { return float64(s.Failures) }),
		num("goodput\n%", 1, func(s metrics.Summary) float64 { return s.GoodputPct }),
		num("lost\nGPU-h", 0, func(s metrics.Summary) float64 { return s.FailureLostGPUHours }),
		num("rollback\nGPU-h", 0, func(s metrics.Summary) float64 { return s.FailureRollbackGPUHours }),
		num("overhead\nGPU-h", 0, func(s metrics.Summary) float64 { return s.FailureOverheadGPUHours }),
		num("held idle\nGPU-h", 0, func(s metrics.Summary) float64 { return s.FailureIdleGPUHours }),
		num("hung\nGPU-h", 0, func(s metrics.Summary) float64 { return s.FailureHungGPUHours }),
		happened(dur("recovery\nmean", func(s metrics.Summary) float64 { return s.RecoveryMeanS }), recovered),
		happened(dur("recovery\np95", func(s metrics.Summary) float64 { return s.RecoveryP95S }), recovered),
	}
}

func recovered(s metrics.Summary) bool { return s.Recoveries > 0 }

// unstarted: jobs were left waiting at the end (rejected jobs fit nowhere,
// for any policy; a job over its queue's limit starts under a policy
// without limits); unfinished: jobs did not complete.
func unstarted(s metrics.Summary) bool { return s.JobsStillPending+s.JobsOverQueueLimit > 0 }
func unfinished(s metrics.Summary) bool {
	return s.JobsCompleted+s.JobsNeverFit+s.JobsTerminated < s.JobsSubmitted
}

// partial adds partialMark to a figure over only the jobs that started (or
// completed) when some run of the row left others that never did.
func partial(c column, left func(metrics.Summary) bool) column {
	cell := c.Cell
	c.Cell = func(rs []metrics.Result) string {
		v := cell(rs)
		if v != never && v != none && anyRun(rs, left) {
			v += partialMark
		}
		return v
	}
	return c
}

// happened shows "none" in a column whose figure measures an event no run
// of the row had (no job started, no recovery), instead of a 0 that would
// read as the best figure.
func happened(c column, occurred func(metrics.Summary) bool) column {
	cell := c.Cell
	c.Cell = func(rs []metrics.Result) string {
		if !anyRun(rs, occurred) {
			return never
		}
		return cell(rs)
	}
	return c
}

func anyRun(rs []metrics.Result, f func(metrics.Summary) bool) bool {
	for _, r := range rs {
		if f(r.Summary) {
			return true
		}
	}
	return false
}

func fill(c *comparison, title string, cols []column) section {
	s := section{Title: title, Header: []string{"policy"}}
	for _, col := range cols {
		s.Header = append(s.Header, col.Head)
	}
	for _, p := range c.Policies {
		row := []string{p.Name}
		for _, col := range cols {
			row = append(row, col.Cell(p.Runs))
		}
		s.Rows = append(s.Rows, row)
	}
	markBest(&s)
	return s
}

func fgdColumns() []column {
	var cols []column
	for _, k := range fgdCheckpoints {
		f := entry(func(s metrics.Summary) map[string]float64 { return s.UnallocatedAt }, k)
		cols = append(cols, column{"unalloc\n@" + k + "%", func(rs []metrics.Result) string {
			return fixed(statOf(rs, f), 2, true)
		}})
	}
	return append(cols,
		column{"frag\n%", func(rs []metrics.Result) string {
			return fixed(statOf(rs, field(func(s metrics.Summary) float64 { return s.FragPct })), 2, false)
		}},
		column{"decision\nµs/pod", func(rs []metrics.Result) string {
			return fixed(statOf(rs, field(func(s metrics.Summary) float64 { return s.DecisionMeanUS })), 1, false)
		}},
	)
}

// overQueueLimit: some run left jobs that asked more than their queue's
// limit; without queues, or with none, the column would only hold zeros.
func overQueueLimit(c *comparison) bool {
	for _, p := range c.Policies {
		if anyRun(p.Runs, func(s metrics.Summary) bool { return s.JobsOverQueueLimit > 0 }) {
			return true
		}
	}
	return false
}

func timeColumns(c *comparison) []column {
	dur := func(head string, f func(s metrics.Summary) float64) column {
		return column{head, func(rs []metrics.Result) string { return duration(statOf(rs, field(f))) }}
	}
	num := func(head string, f func(s metrics.Summary) int) column {
		return column{head, func(rs []metrics.Result) string {
			return count(statOf(rs, field(func(s metrics.Summary) float64 { return float64(f(s)) })))
		}}
	}
	// A wait exists only for a job that started, a JCT for one that
	// completed: with none, "0s" would read as the best possible figure.
	started := func(s metrics.Summary) bool { return s.JobsStarted > 0 }
	completed := func(s metrics.Summary) bool { return s.JobsCompleted > 0 }
	cols := []column{
		{"useful\n%", func(rs []metrics.Result) string {
			return fixed(statOf(rs, field(func(s metrics.Summary) float64 { return s.UtilizationPct })), 1, true)
		}},
		{"alloc\n%", func(rs []metrics.Result) string {
			return fixed(statOf(rs, field(func(s metrics.Summary) float64 { return s.AllocatedPct })), 1, false)
		}},
		partial(happened(dur("wait\np50", func(s metrics.Summary) float64 { return s.WaitP50S }), started), unstarted),
		partial(happened(dur("wait\np95", func(s metrics.Summary) float64 { return s.WaitP95S }), started), unstarted),
		partial(happened(dur("wait\nmax", func(s metrics.Summary) float64 { return s.WaitMaxS }), started), unstarted),
		partial(happened(dur("JCT\nmean", func(s metrics.Summary) float64 { return s.JCTMeanS }), completed), unfinished),
		num("jobs\ndone", func(s metrics.Summary) int { return s.JobsCompleted }),
		num("never\nfit", func(s metrics.Summary) int { return s.JobsNeverFit }),
	}
	if overQueueLimit(c) {
		cols = append(cols, num("over\nlimit", func(s metrics.Summary) int { return s.JobsOverQueueLimit }))
	}
	return append(cols, num("still\npending", func(s metrics.Summary) int { return s.JobsStillPending }))
}

// wholeRunColumns are the figures from the first submission to the last
// event: a policy that defers work past the arrival window cannot hide it.
func wholeRunColumns() []column {
	pctCol := func(head string, f func(s metrics.Summary) float64) column {
		return column{head, func(rs []metrics.Result) string { return fixed(statOf(rs, field(f)), 1, false) }}
	}
	dur := func(head string, f func(s metrics.Summary) float64) column {
		return column{head, func(rs []metrics.Result) string { return duration(statOf(rs, field(f))) }}
	}
	num := func(head string, f func(s metrics.Summary) int) column {
		return column{head, func(rs []metrics.Result) string {
			return count(statOf(rs, field(func(s metrics.Summary) float64 { return float64(f(s)) })))
		}}
	}
	return []column{
		dur("makespan", func(s metrics.Summary) float64 { return s.MakespanS }),
		pctCol("useful\n%", func(s metrics.Summary) float64 { return s.UtilizationMakespanPct }),
		pctCol("work\n%", func(s metrics.Summary) float64 { return s.WorkMakespanPct }),
		pctCol("alloc\n%", func(s metrics.Summary) float64 { return s.AllocatedMakespanPct }),
		dur("wait mean\ncens.", func(s metrics.Summary) float64 { return s.WaitCensoredMeanS }),
		dur("wait p95\ncens.", func(s metrics.Summary) float64 { return s.WaitCensoredP95S }),
		dur("JCT\np95", func(s metrics.Summary) float64 { return s.JCTP95S }),
		num("partial\ngangs", func(s metrics.Summary) int { return s.PartialGangs }),
		num("rdzv\nfailed", func(s metrics.Summary) int { return s.RendezvousFailures }),
	}
}

// sizeColumns are the censored waits and the JCTs of each job-size class
// some run recorded, or nil.
func sizeColumns(c *comparison) (wait, jct []column) {
	seen := map[string]bool{}
	for _, p := range c.Policies {
		for _, r := range p.Runs {
			for _, sc := range r.Summary.SizeClasses {
				seen[sc.Class] = true
			}
		}
	}
	for _, class := range metrics.SizeClasses {
		if !seen[class.Name] {
			continue
		}
		pick := func(f func(sc metrics.SizeClass) (float64, bool)) valueFn {
			return func(s metrics.Summary) (float64, bool) {
				for _, sc := range s.SizeClasses {
					if sc.Class == class.Name {
						return f(sc)
					}
				}
				return 0, false
			}
		}
		pair := func(mean, p95 valueFn) func(rs []metrics.Result) string {
			return func(rs []metrics.Result) string {
				return duration(statOf(rs, mean)) + " / " + duration(statOf(rs, p95))
			}
		}
		wait = append(wait, column{class.Name, pair(
			pick(func(sc metrics.SizeClass) (float64, bool) { return sc.WaitMeanS, true }),
			pick(func(sc metrics.SizeClass) (float64, bool) { return sc.WaitP95S, true }))})
		jct = append(jct, column{class.Name, pair(
			pick(func(sc metrics.SizeClass) (float64, bool) { return sc.JCTMeanS, sc.Completed > 0 }),
			pick(func(sc metrics.SizeClass) (float64, bool) { return sc.JCTP95S, sc.Completed > 0 }))})
	}
	return wait, jct
}

// localityColumns are the topology figures, or nil when no run recorded any
// (a trace without multi-node or multi-GPU jobs): a section of dashes would
// only push the table off the screen.
func localityColumns(c *comparison) []column {
	minDom := func(s metrics.Summary) map[string]float64 { return s.MinDomainShare }
	levels := levelOrder(c, mapKeys(c, minDom))
	var recorded bool
	for _, p := range c.Policies {
		for _, r := range p.Runs {
			s := r.Summary
			recorded = recorded || s.MultiNodeGangs > 0 || s.MinPCIeShare > 0 || s.CommSlowdownMean > 0
		}
	}
	if len(levels) == 0 && !recorded {
		return nil
	}
	cols := []column{{"multi-node\ngangs", func(rs []metrics.Result) string {
		return count(statOf(rs, field(func(s metrics.Summary) float64 { return float64(s.MultiNodeGangs) })))
	}}}
	for _, lv := range levels {
		f := entry(minDom, lv)
		cols = append(cols, column{lv + "\nmin-dom %", func(rs []metrics.Result) string { return share(statOf(rs, f)) }})
	}
	return append(cols,
		column{"PCIe\nmin %", func(rs []metrics.Result) string {
			return share(statOf(rs, field(func(s metrics.Summary) float64 { return s.MinPCIeShare })))
		}},
		column{"comm\nslowdown", func(rs []metrics.Result) string {
			return fixed(statOf(rs, field(func(s metrics.Summary) float64 { return s.CommSlowdownMean })), 3, false)
		}},
	)
}

// Table writes a terminal table comparing the policies of results: one row
// per policy, in the order of each policy's first result, figures averaged
// over seeds. The columns depend on the protocol: fgd shows unallocated GPU %
// at 100–130% arrived, fragmentation and decision cost; replay and trace
// protocols show utilization, waits, JCT, job outcomes and, when recorded,
// topology locality. It fails on an empty input or on results of different
// inputs.
func Table(w io.Writer, results []metrics.Result) error {
	c, err := compare(results)
	if err != nil {
		return err
	}
	g := buildGrid(c)
	var b strings.Builder
	b.WriteString(g.Caption + "\n")
	for _, s := range g.Sections {
		b.WriteString("\n")
		if s.Title != "" {
			b.WriteString(s.Title + "\n")
		}
		b.WriteString(renderText(s) + "\n")
	}
	for _, n := range g.Notes {
		b.WriteString(n + "\n")
	}
	_, err = io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("report: writing table: %w", err)
	}
	return nil
}

// renderText lays a section out with light box lines and right-aligned
// figures; headers keep their line breaks and are not upper-cased.
func renderText(s section) string {
	t := table.NewWriter()
	t.SetStyle(table.StyleLight)
	t.Style().Format.Header = text.FormatDefault
	header := make(table.Row, len(s.Header))
	for i, h := range s.Header {
		header[i] = h
	}
	t.AppendHeader(header)
	for _, r := range s.Rows {
		row := make(table.Row, len(r))
		for i, v := range r {
			row[i] = v
		}
		t.AppendRow(row)
	}
	var cfg []table.ColumnConfig
	for i := 2; i <= len(s.Header); i++ { // column numbers are 1-based
		cfg = append(cfg, table.ColumnConfig{Number: i, Align: text.AlignRight, AlignHeader: text.AlignRight})
	}
	t.SetColumnConfigs(cfg)
	return t.Render()
}

// levelOrder puts topology levels narrowest first (host, rack, block, ...):
// a gang spans at least as many domains of a narrower level as of a wider
// one, so the mean number spanned, summed over runs, orders them without the
// report having to know the cluster's levels. Ties keep name order.
func levelOrder(c *comparison, levels []string) []string {
	spanned := map[string]float64{}
	for _, p := range c.Policies {
		for _, r := range p.Runs {
			for lv, v := range r.Summary.MeanDomainsSpanned {
				spanned[lv] += v
			}
		}
	}
	out := append([]string(nil), levels...)
	sort.SliceStable(out, func(i, j int) bool { return spanned[out[i]] > spanned[out[j]] })
	return out
}
