package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/corral-dev/corral/internal/metrics"
	"github.com/corral-dev/corral/internal/trace"
)

// small is a quick valid batch: a 32-GPU cluster and 40 generated jobs.
func small(t *testing.T) simOptions {
	return simOptions{cluster: "dgx-h100:blocks=1,racks=2,nodes=2", trace: "gen:llm?jobs=40", seeds: "42",
		policies: "corral,spread", out: t.TempDir(), noProgress: true, maxRejections: 5}
}

// TestSimFlagsCheckedFirst: every bad flag and unwritable output is an
// error from planSim, which runs before any simulation.
func TestSimFlagsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		edit func(*simOptions)
		want string
	}{
		"seed twice":           {func(o *simOptions) { o.seeds = "42,42" }, `seed 42 appears twice`},
		"seed in range twice":  {func(o *simOptions) { o.seeds = "40-45,43" }, `seed 43 appears twice`},
		"empty seed":           {func(o *simOptions) { o.seeds = "42," }, `empty seed`},
		"bad seed range":       {func(o *simOptions) { o.seeds = "9-1" }, `bad seed range "9-1"`},
		"policy twice":         {func(o *simOptions) { o.policies = "corral, corral" }, `corral appears twice`},
		"unknown policy":       {func(o *simOptions) { o.policies = "corral,nosuch" }, `--policies`},
		"out is a file":        {func(o *simOptions) { o.out = file }, `--out ` + file + `: is a file`},
		"out unwritable":       {func(o *simOptions) { o.out = "/proc/corral" }, `--out`},
		"json in no folder":    {func(o *simOptions) { o.jsonFile = filepath.Join(dir, "no", "s.json") }, `--json ` + filepath.Join(dir, "no", "s.json") + `: folder`},
		"json is a folder":     {func(o *simOptions) { o.jsonFile = dir }, `is a folder`},
		"save-trace not csv":   {func(o *simOptions) { o.saveTrace = filepath.Join(dir, "t.yaml") }, `want a .csv file`},
		"failures on fgd":      {func(o *simOptions) { o.trace, o.cluster, o.failures = "openb:default", "openb", "llama3" }, `--failures needs the replay protocol`},
		"bad failures":         {func(o *simOptions) { o.failures = "scale=-1" }, `--failures`},
		"spares alone":         {func(o *simOptions) { o.spares = "rack=8" }, `only with --failures`},
		"negative rejections":  {func(o *simOptions) { o.maxRejections = -1 }, `--show-rejections -1`},
		"negative reservation": {func(o *simOptions) { o.reservations = -2 }, `--reservations -2`},
		"max runtime action":   {func(o *simOptions) { o.onMaxRuntime = "Kill" }, `want Terminate or Requeue`},
		"negative grace":       {func(o *simOptions) { o.reclaimGrace = -time.Hour }, `--reclaim-grace -1h0m0s: must not be negative`},
		"lost-work factor NaN": {func(o *simOptions) { o.maxLostPerWork = math.NaN() }, `--max-lost-per-work NaN: want a finite number`},
		"lost-work factor Inf": {func(o *simOptions) { o.maxLostPerWork = math.Inf(1) }, `--max-lost-per-work +Inf: want a finite number`},
		"bad protocol":         {func(o *simOptions) { o.protocol = "fast" }, `--protocol`},
		"queues on fgd":        {func(o *simOptions) { o.protocol, o.queues = "fgd", "teams" }, `--queues needs the replay protocol`},
		"missing trace":        {func(o *simOptions) { o.trace = filepath.Join(dir, "none.csv") }, `none.csv`},
		"topology, no nodes":   {func(o *simOptions) { o.topology = "../../examples/topology.yaml" }, `--topology applies to a --cluster of Kubernetes Node manifests`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := small(t)
			tc.edit(&o)
			_, err := planSim(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("planSim: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// runJSON runs a batch and returns its JSON summary.
func runJSON(t *testing.T, o simOptions) []metrics.Result {
	t.Helper()
	var out, errs bytes.Buffer
	if err := runSim(&out, &errs, o, "test"); err != nil {
		t.Fatalf("%v\n%s", err, errs.String())
	}
	b, err := os.ReadFile(filepath.Join(o.out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Policies map[string]struct {
			Runs []metrics.Summary `json:"runs"`
		} `json:"policies"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var runs []metrics.Result
	for _, name := range slices.Sorted(maps.Keys(doc.Policies)) {
		for _, s := range doc.Policies[name].Runs {
			runs = append(runs, metrics.Result{Policy: name, Summary: s})
		}
	}
	if len(runs) == 0 {
		t.Fatalf("no runs in %s", b)
	}
	return runs
}

// TestSaveTraceReplays: the trace --save-trace writes replays to the same
// results as the generated trace it came from.
func TestSaveTraceReplays(t *testing.T) {
	o := small(t)
	// The CSV trace holds each job's declared checkpoint interval, not the
	// generator's per-job true schedule (spread and jitter), so the round
	// trip is exact only for jobs that checkpoint as they declare.
	o.trace = "gen:llm?jobs=40&ckptspread=0&ckptjitter=0"
	o.saveTrace = filepath.Join(t.TempDir(), "llm.csv")
	gen := runJSON(t, o)
	o2 := small(t)
	o2.trace = o.saveTrace
	replayed := runJSON(t, o2)
	// Engine timings are wall-clock measurements; the trace name differs.
	ignore := cmp.Options{cmpopts.IgnoreFields(metrics.Result{}, "Trace"),
		cmpopts.IgnoreFields(metrics.Summary{}, "WallSeconds", "DecisionMeanUS", "CycleMeanUS", "CycleMaxUS")}
	if diff := cmp.Diff(gen, replayed, ignore); diff != "" {
		t.Errorf("replayed trace differs (-generated +replayed):\n%s", diff)
	}
	if gen[0].Summary.JobsSubmitted != 40 {
		t.Errorf("%d jobs submitted, want 40", gen[0].Summary.JobsSubmitted)
	}
}

func TestSaveTracePerSeed(t *testing.T) {
	if got := saveTracePath("out/llm.csv", 43, 3); got != "out/llm-seed43.csv" {
		t.Errorf("saveTracePath = %q", got)
	}
	if got := saveTracePath("llm.csv", 43, 1); got != "llm.csv" {
		t.Errorf("saveTracePath = %q", got)
	}
}

// TestExamplesSimulate runs every simulator input of examples/ through the
// command's readers and a short simulation, as the docs tell users to.
func TestExamplesSimulate(t *testing.T) {
	cases := map[string]struct{ cluster, topology, trace, queues string }{
		"kwok nodes + Topology":  {cluster: "../../examples/sample-cluster.yaml", topology: "../../examples/topology.yaml", trace: "../../examples/sim/jobs.csv"},
		"kwok nodes, flat":       {cluster: "../../examples/sample-cluster.yaml", trace: "../../examples/sim/jobs.yaml"},
		"cluster file + queues":  {cluster: "../../examples/sim/cluster.yaml", trace: "../../examples/sim/jobs.csv", queues: "../../examples/sim/queues.yaml"},
		"cluster file + sacct":   {cluster: "../../examples/sim/cluster.yaml", trace: "../../examples/sim/jobs.sacct"},
		"cluster file + philly":  {cluster: "../../examples/sim/cluster.yaml", trace: "philly:../../examples/sim/jobs.philly.json"},
		"sample nodes + gen:llm": {cluster: "../../examples/sample-cluster.yaml", topology: "../../examples/topology.yaml", trace: "gen:llm?jobs=30"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := small(t)
			o.cluster, o.topology, o.trace, o.queues = tc.cluster, tc.topology, tc.trace, tc.queues
			runs := runJSON(t, o)
			for _, r := range runs {
				if r.Summary.JobsStarted == 0 {
					t.Errorf("%s: no job started", r.Policy)
				}
			}
		})
	}
	// Every file in examples/sim is one of the cases above.
	files, _ := filepath.Glob("../../examples/sim/*")
	for _, f := range files {
		used := false
		for _, tc := range cases {
			used = used || tc.cluster == f || strings.TrimPrefix(tc.trace, "philly:") == f || tc.queues == f
		}
		if !used {
			t.Errorf("%s is not run by this test", f)
		}
	}
}

// TestSampleClusterNodes: the kwok sample converts as the scheduler
// converts Nodes: eight 8-GPU nodes in two racks of one block.
func TestSampleClusterNodes(t *testing.T) {
	c, err := loadCluster("../../examples/sample-cluster.yaml", "../../examples/topology.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec := &trace.ClusterSpec{Nodes: c.Nodes}
	if len(c.Nodes) != 8 || spec.GPUs() != 64 {
		t.Errorf("%d nodes, %d GPUs; want 8 and 64", len(c.Nodes), spec.GPUs())
	}
	racks := map[string]int{}
	for _, n := range c.Nodes {
		racks[n.Labels["corral.dev/rack"]]++
		if n.Unschedulable {
			t.Errorf("node %s unschedulable", n.Name)
		}
	}
	if diff := cmp.Diff(map[string]int{"r01": 4, "r02": 4}, racks); diff != "" {
		t.Errorf("nodes per rack (-want +got):\n%s", diff)
	}
	if got := len(c.Topology.Levels); got != 2 {
		t.Errorf("%d levels, want block and rack", got)
	}
}
