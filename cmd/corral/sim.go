package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/metrics"
	"github.com/corral-dev/corral/internal/report"
	"github.com/corral-dev/corral/internal/sim"
	"github.com/corral-dev/corral/internal/trace"
	"github.com/corral-dev/corral/internal/version"
	"github.com/corral-dev/corral/internal/workload"
)

// The embedded default: a DGX H100 cluster of 2 blocks × 4 racks × 16 nodes
// (1,024 GPUs) and a generated LLM-era gang workload, replayed in time.
const (
	defaultCluster = "dgx-h100:blocks=2,racks=4,nodes=16"
	defaultTrace   = "gen:llm?jobs=1500"
)

type simOptions struct {
	cluster, topology, trace, protocol string
	policies, seeds                    string
	queues                             string
	out, jsonFile, saveTrace           string
	failures, spares, remediation      string
	noProgress                         bool
	maxRejections                      int
	reservations, reservationsPerQueue int
	checkpointWait                     time.Duration
	reclaimMaxLost                     time.Duration
	reclaimGrace                       time.Duration
	maxLostPerWork                     float64
	onMaxRuntime                       string
	starveAfter                        time.Duration
	reserveConfidence                  float64
	rendezvous, migReconfigure         time.Duration
	info                               string
}

func newSimCmd() *cobra.Command {
	o := simOptions{}
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulate corral and the baselines on a cluster and a trace",
		Long: `sim runs each policy on the same cluster and trace, prints a table comparing
them and writes an HTML report with charts and a JSON summary.

With no flags it runs the embedded default: a DGX H100 cluster (2 blocks × 4
racks × 16 nodes, 1,024 GPUs) and a generated LLM-era gang workload, replayed
in time, for corral and the three systems a user would pick instead: kube
(kube-scheduler's defaults, pod by pod), kube-gang (the same, all or nothing
per job) and kueue-tas (Kueue with topology-aware scheduling).

Clusters: ` + strings.Join(trace.Presets(), ", ") + `, "dgx-h100:blocks=B,racks=R,nodes=N", or a cluster YAML file.
Traces:   ` + strings.Join(trace.TraceNames(), ", ") + `, a trace file (.csv, .yaml,
          Slurm sacct --parsable2 output), or philly:PATH (a Philly cluster_job_log).
Queues:   ` + strings.Join(trace.QueuePresets(), ", ") + ` (gen:llm's team-a, team-b, team-c, each guaranteed a quarter
          of the GPUs, spare shared 1:2:1; teams-strict reclaims from a borrower
          even below its own queue's guarantee), or a queue YAML file; replay only.
Policies: corral; the baselines kube, kube-gang, kueue-tas (docs/simulator.md
          says what each models and from which source); the ablations spread,
          binpack (the FGD paper's baselines), greedy, fifo, corral-newest
          (victims by lowest priority then newest) and corral-consolidate.
Protocols: fgd (resample to 130% of GPU capacity, place one by one, no departures)
           replay (submit and finish in time). The default is fgd for openb traces
           and replay otherwise.`,
		Example: `  corral sim
  corral sim --cluster openb --trace openb:default --protocol fgd --seeds 42-51
  corral sim --cluster lingjun --trace gen:llm?jobs=3000 --json out.json
  corral sim --trace 'gen:llm?jobs=800&late=0.5' --queues teams --policies corral,corral-newest
  corral sim --info no-runtimes --policies corral,greedy,kube-gang,kueue-tas --seeds 45-49
  corral sim --trace gen:llm --save-trace llm.csv && corral sim --trace llm.csv
  corral sim --cluster examples/sample-cluster.yaml --topology examples/topology.yaml --trace examples/sim/jobs.csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := withInformation(o, cmd.Flags().Changed("mig-reconfigure"))
			if err != nil {
				return err
			}
			return runSim(cmd.OutOrStdout(), cmd.ErrOrStderr(), o, strings.Join(os.Args, " "))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.cluster, "cluster", defaultCluster, "cluster preset or YAML file")
	f.StringVar(&o.topology, "topology", "", "a Topology manifest (examples/topology.yaml) for a --cluster of Kubernetes Node manifests")
	f.StringVar(&o.trace, "trace", defaultTrace, "trace name, generator or file")
	f.StringVar(&o.protocol, "protocol", "", "fgd or replay (default: fgd for openb traces, else replay)")
	f.StringVar(&o.policies, "policies", "corral,kube,kube-gang,kueue-tas", "comma-separated policies")
	f.StringVar(&o.queues, "queues", "", "queue preset or YAML file (replay)")
	f.StringVar(&o.seeds, "seeds", "42", "seeds: 42, 42,43 or 42-51")
	f.StringVar(&o.out, "out", "corral-report", "folder for report.html and summary.json")
	f.StringVar(&o.jsonFile, "json", "", "also write the JSON summary to this file")
	f.StringVar(&o.saveTrace, "save-trace", "", "write the trace as run to this corral CSV job trace (.csv), which --trace replays; with several seeds, one file per seed (name-seed42.csv)")
	f.StringVar(&o.failures, "failures", "", `inject failures (replay): "llama3" (published rates), "llama3,scale=200,overhead=5m", or device=R,node=R,device-repair=D,node-repair=D (see docs/simulator.md)`)
	f.StringVar(&o.spares, "spares", "", `spare GPUs corral holds for replacing failed ranks, per domain: "rack=8"`)
	f.StringVar(&o.remediation, "remediation", "", "override every job's remediation policy: RestartGang, ReplaceRanks or WaitForRepair")
	f.BoolVar(&o.noProgress, "no-progress", false, "do not draw progress bars")
	f.IntVar(&o.maxRejections, "show-rejections", 5, "how many rejected jobs to list")
	f.DurationVar(&o.checkpointWait, "checkpoint-wait", 0, "corral: longest wait for preemption victims' next checkpoint (0: the engine default, negative: never wait)")
	f.DurationVar(&o.reclaimMaxLost, "reclaim-max-lost", 0, "corral: reclaim spares a borrower that would lose more progress than this since its last checkpoint, for --reclaim-grace (0: the engine default, 6h; negative: spare none)")
	f.DurationVar(&o.reclaimGrace, "reclaim-grace", 0, "corral: how long after a job's submission reclaim spares such borrowers for it (0: the engine default, 24h)")
	f.Float64Var(&o.maxLostPerWork, "max-lost-per-work", 0, "corral: a priority preemption may throw away at most this many times the preemptor's expected work, its GPUs × expected runtime (0: the engine default, 2; negative: no bound)")
	f.IntVar(&o.reservations, "reservations", 0, "corral: blocked jobs given a reservation per cycle (0: the engine default)")
	f.IntVar(&o.reservationsPerQueue, "reservations-per-queue", 0, "corral: reservations per queue per cycle (0: the engine default)")
	f.StringVar(&o.onMaxRuntime, "on-max-runtime", "", "Terminate or Requeue a job past its max runtime (default Terminate)")
	f.DurationVar(&o.rendezvous, "rendezvous-timeout", sim.DefaultRendezvous, "replay: a job whose pods have not all started by then fails, frees them and is resubmitted (negative: never)")
	f.DurationVar(&o.migReconfigure, "mig-reconfigure", sim.DefaultMIGReconfigure, "replay: how long a MIG re-partition keeps the GPU out of service (negative: instantaneous, the oracle)")
	f.Float64Var(&o.reserveConfidence, "reserve-confidence", 0, "corral: least confidence (0-1) in a blocked job's expected start to reserve for it before it starves (0: the engine default, 0.7; negative: always)")
	f.StringVar(&o.info, "info", infoRealistic, "what the scheduler is told about gen:llm jobs: realistic (20% declare an over-estimated runtime, checkpoints jittered and known once reported, MIG re-partitions take time), no-runtimes (nobody declares one) or oracle (exact runtimes, periodic checkpoints, instantaneous re-partitions)")
	f.DurationVar(&o.starveAfter, "starve-after", 0, "corral: wait after which a job is reserved ahead of everything (0: the engine default, 24h; negative: off)")
	return cmd
}

// parseSeeds reads "42", "42,43" or "42-51"; a seed given twice would run
// the same simulation twice and count it twice in every mean.
func parseSeeds(s string) ([]int64, error) {
	var out []int64
	seen := map[int64]bool{}
	add := func(v int64) error {
		if seen[v] {
			return fmt.Errorf("--seeds %q: seed %d appears twice", s, v)
		}
		seen[v] = true
		out = append(out, v)
		return nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("--seeds %q: empty seed (want 42, 42,43 or 42-51)", s)
		}
		if lo, hi, ok := strings.Cut(part, "-"); ok && lo != "" {
			a, err1 := strconv.ParseInt(lo, 10, 64)
			b, err2 := strconv.ParseInt(hi, 10, 64)
			if err1 != nil || err2 != nil || b < a || b-a > 10000 {
				return nil, fmt.Errorf("--seeds: bad seed range %q (want LOW-HIGH, at most 10,001 seeds)", part)
			}
			for v := a; v <= b; v++ {
				if err := add(v); err != nil {
					return nil, err
				}
			}
			continue
		}
		v, err := strconv.ParseInt(part, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seeds: bad seed %q (want 42, 42,43 or 42-51)", part)
		}
		if err := add(v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parsePolicies reads a comma-separated list; a policy named twice would
// give two rows of one name that the report cannot tell apart.
func parsePolicies(s string) ([]engine.Policy, error) {
	var out []engine.Policy
	seen := map[engine.Policy]bool{}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, fmt.Errorf("--policies %q: empty policy name", s)
		}
		pol, err := sim.ParsePolicy(p)
		if err != nil {
			return nil, fmt.Errorf("--policies: %w", err)
		}
		if seen[pol] {
			return nil, fmt.Errorf("--policies %q: %s appears twice", s, pol)
		}
		seen[pol] = true
		out = append(out, pol)
	}
	return out, nil
}

// simPlan is everything a batch needs, read and checked before the first
// simulation runs: a bad flag or an unwritable output fails in a second,
// not after an hour of simulations.
type simPlan struct {
	seeds    []int64
	policies []engine.Policy
	protocol sim.Protocol
	spec     *trace.ClusterSpec
	queues   []cycle.QueueSpec
	failures *sim.FailureModel
	traces   []*trace.Trace // one per seed
}

func planSim(o simOptions) (*simPlan, error) {
	p := &simPlan{}
	var err error
	if p.seeds, err = parseSeeds(o.seeds); err != nil {
		return nil, err
	}
	if p.policies, err = parsePolicies(o.policies); err != nil {
		return nil, err
	}
	switch engine.MaxRuntimeAction(o.onMaxRuntime) {
	case "", engine.Terminate, engine.Requeue:
	default:
		return nil, fmt.Errorf("--on-max-runtime %q: want Terminate or Requeue", o.onMaxRuntime)
	}
	for _, n := range []struct {
		flag string
		v    int
	}{{"--show-rejections", o.maxRejections}, {"--reservations", o.reservations}, {"--reservations-per-queue", o.reservationsPerQueue}} {
		if n.v < 0 {
			return nil, fmt.Errorf("%s %d: must not be negative", n.flag, n.v)
		}
	}
	if o.reclaimGrace < 0 {
		return nil, fmt.Errorf("--reclaim-grace %v: must not be negative", o.reclaimGrace)
	}
	if math.IsNaN(o.maxLostPerWork) || math.IsInf(o.maxLostPerWork, 0) {
		return nil, fmt.Errorf("--max-lost-per-work %g: want a finite number (negative: no bound)", o.maxLostPerWork)
	}
	if o.reserveConfidence > 1 {
		return nil, fmt.Errorf("--reserve-confidence %g: want at most 1 (a confidence), or negative to always reserve", o.reserveConfidence)
	}
	p.protocol = sim.Replay
	if strings.HasPrefix(o.trace, "openb:") {
		p.protocol = sim.FGD
	}
	if o.protocol != "" {
		if p.protocol, err = sim.ParseProtocol(o.protocol); err != nil {
			return nil, fmt.Errorf("--protocol: %w", err)
		}
	}
	if p.failures, err = sim.ParseFailures(o.failures); err != nil {
		return nil, fmt.Errorf("--failures: %w", err)
	}
	if p.failures != nil {
		if p.protocol != sim.Replay {
			return nil, fmt.Errorf("--failures needs the replay protocol (failures happen over time; this run is %s): add --protocol replay", p.protocol)
		}
		if p.failures.Spares, err = cycle.ParseSpares(o.spares); err != nil {
			return nil, fmt.Errorf("--spares: %w", err)
		}
		if p.failures.Remediation, err = workload.ParseRemediation(o.remediation); err != nil {
			return nil, fmt.Errorf("--remediation: %w", err)
		}
	} else if o.spares != "" || o.remediation != "" {
		return nil, fmt.Errorf("--spares and --remediation apply only with --failures")
	}
	if err := checkWritable(o); err != nil {
		return nil, err
	}
	if p.spec, err = loadCluster(o.cluster, o.topology); err != nil {
		return nil, err
	}
	if o.queues != "" {
		if p.protocol != sim.Replay {
			return nil, fmt.Errorf("--queues needs the replay protocol (queues divide capacity over time)")
		}
		if p.queues, err = trace.LoadQueues(o.queues, p.spec); err != nil {
			return nil, err
		}
	}
	// Every seed's trace now: a generator that fails on one seed, or a
	// trace file that does not parse, fails before anything runs.
	for _, seed := range p.seeds {
		tr, err := trace.LoadTrace(o.trace, trace.Options{Seed: seed, Cluster: p.spec})
		if err != nil {
			return nil, err
		}
		p.traces = append(p.traces, tr)
	}
	return p, nil
}

// checkWritable makes sure that every output can be written, by writing
// (and removing) a file where each will go.
func checkWritable(o simOptions) error {
	try := func(flag, dir string) error {
		f, err := os.CreateTemp(dir, ".corral-write-check-*")
		if err != nil {
			return fmt.Errorf("%s: cannot write in %s: %w", flag, dir, errors.Unwrap(err))
		}
		f.Close()
		return os.Remove(f.Name())
	}
	if o.out != "" {
		if fi, err := os.Stat(o.out); err == nil && !fi.IsDir() {
			return fmt.Errorf("--out %s: is a file, want a folder", o.out)
		}
		if err := os.MkdirAll(o.out, 0o755); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		if err := try("--out", o.out); err != nil {
			return err
		}
	}
	for _, f := range []struct{ flag, path string }{{"--json", o.jsonFile}, {"--save-trace", o.saveTrace}} {
		if err := checkFileWritable(f.flag, f.path); err != nil {
			return err
		}
	}
	if o.saveTrace != "" && strings.ToLower(filepath.Ext(o.saveTrace)) != ".csv" {
		return fmt.Errorf("--save-trace %s: want a .csv file (the corral CSV job trace)", o.saveTrace)
	}
	return nil
}

// checkFileWritable makes sure that the file a flag names ("" for none)
// can be written, by writing (and removing) a file beside it.
func checkFileWritable(flag, path string) error {
	if path == "" {
		return nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s %s: is a folder, want a file", flag, path)
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s %s: folder %s does not exist", flag, path, dir)
	}
	f, err := os.CreateTemp(dir, ".corral-write-check-*")
	if err != nil {
		return fmt.Errorf("%s: cannot write in %s: %w", flag, dir, errors.Unwrap(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// saveTracePath is where seed's trace goes: the file itself for one seed,
// name-seedN.csv beside it for several.
func saveTracePath(path string, seed int64, seeds int) string {
	if seeds == 1 {
		return path
	}
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s-seed%d%s", strings.TrimSuffix(path, ext), seed, ext)
}

func saveTrace(path string, tr *trace.Trace) error {
	var buf bytes.Buffer
	if err := trace.WriteJobTraceCSV(&buf, tr.Jobs); err != nil {
		return fmt.Errorf("--save-trace: %w", err)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func runSim(stdout, stderr io.Writer, o simOptions, command string) error {
	p, err := planSim(o)
	if err != nil {
		return err
	}
	if o.saveTrace != "" {
		for i, tr := range p.traces {
			path := saveTracePath(o.saveTrace, p.seeds[i], len(p.seeds))
			if err := saveTrace(path, tr); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "trace: %s (%d jobs; replay it with --trace %s)\n", path, len(tr.Jobs), path)
		}
	}
	bar := newBatchProgress(stderr, len(p.seeds)*len(p.policies), !o.noProgress && isTerminal(stderr))
	var results []metrics.Result
	var rejected []sim.Rejection
	for si, seed := range p.seeds {
		in := sim.Input{ClusterName: o.cluster, Topology: p.spec.Topology, Nodes: p.spec.Nodes, TraceName: o.trace, Queues: p.queues}
		for _, j := range p.traces[si].Jobs {
			in.Jobs = append(in.Jobs, sim.Job{Job: j.Job, Runtime: j.Runtime, Checkpoints: sim.Checkpoints{
				Every: j.CheckpointEvery, Jitter: j.CheckpointJitter, Seed: uint64(seed)}})
		}
		for _, pol := range p.policies {
			cfg := sim.Config{Policy: pol, Protocol: p.protocol, Seed: seed, Backfill: engine.BackfillConfig{
				MaxReservations: o.reservations, MaxReservationsPerQueue: o.reservationsPerQueue,
				OnMaxRuntime: engine.MaxRuntimeAction(o.onMaxRuntime), StarveAfter: o.starveAfter, ReserveConfidence: o.reserveConfidence},
				CheckpointWait: o.checkpointWait, ReclaimMaxLost: o.reclaimMaxLost, ReclaimGrace: o.reclaimGrace,
				MaxLostPerWork: o.maxLostPerWork, Failures: p.failures, Rendezvous: o.rendezvous, MIGReconfigure: o.migReconfigure}
			cfg.Progress = bar.start(fmt.Sprintf("%s, seed %d", pol, seed))
			res, rej, err := sim.Run(in, cfg)
			bar.runDone()
			if err != nil {
				return err
			}
			results = append(results, res)
			if pol == p.policies[0] && seed == p.seeds[0] {
				rejected = rej
			}
		}
	}
	bar.finish()
	if err := report.Table(stdout, results); err != nil {
		return err
	}
	if len(rejected) > 0 {
		// Jobs that never fit were skipped, jobs over their queue's limit
		// kept pending (their queue counted them); each line says which.
		fmt.Fprintf(stdout, "\n%d jobs could never start (%s, seed %d):\n", len(rejected), p.policies[0], p.seeds[0])
		for i, r := range rejected {
			if i >= o.maxRejections {
				fmt.Fprintf(stdout, "  ... and %d more (see summary.json)\n", len(rejected)-i)
				break
			}
			where := ""
			if r.Source != "" {
				where = r.Source + ": "
			}
			fmt.Fprintf(stdout, "  %sjob %s: %s\n", where, r.Job, r.Reason)
		}
	}
	return writeOutputs(stdout, o, results, command)
}

func writeOutputs(stdout io.Writer, o simOptions, results []metrics.Result, command string) error {
	meta := report.Meta{Command: command, Machine: machine(), Generated: time.Now(), Version: version.Get().String()}
	var js bytes.Buffer
	if err := report.WriteJSONMeta(&js, results, meta); err != nil {
		return err
	}
	if o.jsonFile != "" {
		if err := os.WriteFile(o.jsonFile, js.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if o.out == "" {
		return nil
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "summary.json"), js.Bytes(), 0o644); err != nil {
		return err
	}
	var html bytes.Buffer
	if err := report.WriteHTML(&html, results, meta); err != nil {
		return err
	}
	page := filepath.Join(o.out, "report.html")
	if err := os.WriteFile(page, html.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nreport: %s\nsummary: %s\n", page, filepath.Join(o.out, "summary.json"))
	return nil
}

// machine describes the host for reports: CPU model, cores, OS.
func machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				if _, v, ok := strings.Cut(line, ":"); ok {
					model = strings.TrimSpace(v)
				}
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d cores, %s/%s, %s", model, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
