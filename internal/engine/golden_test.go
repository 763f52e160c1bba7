package engine

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/health"
	"github.com/corral-dev/corral/internal/workload"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/cycles/*.txt")

// TestCycleScripts runs the whole-cycle scripts in testdata/cycles: each
// stanza is a command, a "----" line and the output it must give (a cycle's
// Plan as text), ended by a blank line. Commands:
//
//	cluster racks=R nodes=N [policy=P] [reservations=K]  a rack-level DGX cluster, and the engine
//	run ID pods=P gpus=G on=NODE,... [job options]       a job already running on those nodes
//	submit ID pods=P gpus=G [job options]                a pending job
//	fail NODE gpu=K                                      GPU K of NODE fails now (XID 79)
//	cycle                                                run one cycle, apply its Plan, print it
//	advance DURATION                                     move the clock; jobs past their expected runtime end
//
// Job options: required=LEVEL priority=N expected=DURATION min=M ckpt=DURATION
// preemptible. Run with -rewrite to regenerate the outputs, then review the diff.
func TestCycleScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/cycles/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata/cycles (%v)", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

type stanza struct {
	cmd, want string
}

func parseScript(t *testing.T, text string) (header string, out []stanza) {
	t.Helper()
	lines := strings.Split(text, "\n")
	i := 0
	var head []string
	for ; i < len(lines) && (strings.HasPrefix(lines[i], "#") || lines[i] == ""); i++ {
		head = append(head, lines[i])
	}
	header = strings.Join(head, "\n")
	for i < len(lines) {
		if lines[i] == "" {
			i++
			continue
		}
		st := stanza{cmd: lines[i]}
		i++
		if i >= len(lines) || lines[i] != "----" {
			t.Fatalf("line %d: want ---- after %q", i+1, st.cmd)
		}
		i++
		var want []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		st.want = strings.Join(want, "\n")
		out = append(out, st)
	}
	return header, out
}

func runScript(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	header, stanzas := parseScript(t, string(b))
	var w *world
	var got strings.Builder
	got.WriteString(header)
	for _, st := range stanzas {
		out := w.do(t, &w, st.cmd)
		if !*rewrite {
			if diff := cmp.Diff(st.want, out); diff != "" {
				t.Errorf("%s: %s (-want +got):\n%s", path, st.cmd, diff)
			}
		}
		fmt.Fprintf(&got, "\n%s\n----\n", st.cmd)
		if out != "" {
			got.WriteString(out + "\n")
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimRight(got.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// do runs one command; cluster sets *wp, the others need it set.
func (w *world) do(t *testing.T, wp **world, cmd string) string {
	t.Helper()
	f := strings.Fields(cmd)
	args := map[string]string{}
	var pos []string
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			args[k] = v
		} else {
			pos = append(pos, a)
		}
	}
	if f[0] != "cluster" && w == nil {
		t.Fatalf("%q before cluster", cmd)
	}
	switch f[0] {
	case "cluster":
		cfg := Config{Policy: Policy(args["policy"])}
		if r, ok := args["reservations"]; ok {
			cfg.Backfill.MaxReservations = atoi(t, r)
		}
		*wp = newWorld(t, build.State(build.Topo("rack"), build.Racks(atoi(t, args["racks"]), atoi(t, args["nodes"]))), cfg)
		return ""
	case "run":
		w.run(scriptJob(t, pos, args), strings.Split(args["on"], ",")...)
		return ""
	case "submit":
		w.submit(scriptJob(t, pos, args))
		return ""
	case "fail":
		n, ok := w.s.NodeIndex(pos[0])
		if !ok {
			t.Fatalf("no node %s", pos[0])
		}
		k := atoi(t, args["gpu"])
		w.s.SetDeviceHealth(n, k, false)
		w.failures = append(w.failures, health.Failure{Node: pos[0], Device: w.s.Node(n).Devices[k].ID, Since: w.now, Reason: "XID 79"})
		return ""
	case "cycle":
		return describePlan(w.runCycle(), w.now)
	case "advance":
		d, err := time.ParseDuration(pos[0])
		if err != nil {
			t.Fatal(err)
		}
		w.advance(w.now.Add(d))
		return ""
	}
	t.Fatalf("unknown command %q", cmd)
	return ""
}

func scriptJob(t *testing.T, pos []string, args map[string]string) *workload.Job {
	t.Helper()
	if len(pos) == 0 {
		t.Fatal("a job needs an id")
	}
	b := build.Job(pos[0]).Pods(atoi(t, or(args["pods"], "1"))).GPUs(atoi(t, or(args["gpus"], "1")))
	for _, p := range pos[1:] {
		if p == "preemptible" {
			b = b.Preemptible()
		}
	}
	if v, ok := args["required"]; ok {
		b = b.Required(v)
	}
	if v, ok := args["priority"]; ok {
		b = b.Priority(int32(atoi(t, v)))
	}
	if v, ok := args["min"]; ok {
		b = b.Min(atoi(t, v))
	}
	if v, ok := args["expected"]; ok {
		b = b.Expected(duration(t, v))
	}
	if v, ok := args["ckpt"]; ok {
		b = b.Checkpoint(duration(t, v))
	}
	return b.Obj()
}

// describePlan renders a Plan one decision a line, in the order drivers
// apply it; times are relative to now.
func describePlan(p Plan, now time.Time) string {
	var b strings.Builder
	for _, r := range p.Remediations {
		fmt.Fprintf(&b, "remediate %s %s", r.Job, r.Action)
		if r.Domain != "" {
			fmt.Fprintf(&b, " in %s %s", r.Level, r.Domain)
		}
		fmt.Fprintf(&b, ": %s\n", r.Message)
	}
	for _, ev := range p.Evictions {
		fmt.Fprintf(&b, "evict %s %s", ev.Job, ev.Cause)
		if ev.By != "" {
			fmt.Fprintf(&b, " by %s", ev.By)
		}
		fmt.Fprintf(&b, ": %d pods, %.2f GPU-h lost\n", len(ev.Pods), ev.LostGPUSeconds/3600)
	}
	for _, g := range p.Binds {
		fmt.Fprintf(&b, "bind %s in %s %s:", g.Job, g.Level, g.Domain)
		for _, pb := range g.Pods {
			fmt.Fprintf(&b, " %d@%s", pb.Pod.Index, pb.Node)
		}
		b.WriteString("\n")
	}
	for _, r := range p.Reservations {
		fmt.Fprintf(&b, "reserve %s in %s %s from +%s: %s\n", r.Job, r.Level, r.Domain, r.Start.Sub(now), strings.Join(r.Nodes, ","))
	}
	for _, pe := range p.Pending {
		fmt.Fprintf(&b, "wait %s %s", pe.Job, pe.Reason.Verdict)
		if pe.Reason.Level != "" {
			fmt.Fprintf(&b, " at %s", pe.Reason.Level)
		}
		fmt.Fprintf(&b, ": %s\n", pe.Reason.Message)
	}
	s := p.Stats
	fmt.Fprintf(&b, "stats: considered %d, placed %d jobs / %d pods, evictions %d", s.JobsConsidered, s.JobsPlaced,
		s.PodsPlaced, s.Evictions)
	if len(s.EvictionsByCause) > 0 {
		causes := make([]string, 0, len(s.EvictionsByCause))
		for c, n := range s.EvictionsByCause {
			causes = append(causes, fmt.Sprintf("%s %d", c, n))
		}
		sort.Strings(causes)
		fmt.Fprintf(&b, " (%s)", strings.Join(causes, ", "))
	}
	fmt.Fprintf(&b, ", backfilled %d", s.Backfilled)
	if !p.Retry.IsZero() {
		fmt.Fprintf(&b, ", retry at +%s", p.Retry.Sub(now))
	}
	return b.String()
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("bad number %q", s)
	}
	return n
}

func duration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("bad duration %q", s)
	}
	return d
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
