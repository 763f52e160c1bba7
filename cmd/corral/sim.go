package main

import (
	"github.com/corral-dev/corral/internal/cycle"

	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/metrics"
	"github.com/corral-dev/corral/internal/report"
	"github.com/corral-dev/corral/internal/sim"
	"github.com/corral-dev/corral/internal/trace"
	"github.com/corral-dev/corral/internal/workload"
)

// The embedded default: a DGX H100 cluster of 2 blocks × 4 racks × 16 nodes
// (1,024 GPUs) and a generated LLM-era gang workload, replayed in time.
const (
	defaultCluster = "dgx-h100:blocks=2,racks=4,nodes=16"
	defaultTrace   = "gen:llm?jobs=1500"
)

type simOptions struct {
	cluster, trace, protocol, policies, seeds string
	queues                                    string
	out, jsonFile                             string
	failures, spares, remediation             string
	noProgress                                bool
	maxRejections                             int
	reservations, reservationsPerQueue        int
	checkpointWait                            time.Duration
	onMaxRuntime                              string
	starveAfter                               time.Duration
	reserveConfidence                         float64
	rendezvous, migReconfigure                time.Duration
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
Traces:   ` + strings.Join(trace.TraceNames(), ", ") + `, or a trace file (.csv, .yaml).
Queues:   ` + strings.Join(trace.QueuePresets(), ", ") + ` (gen:llm's team-a, team-b, team-c, each guaranteed a quarter
          of the GPUs, spare shared 1:2:1), or a queue YAML file; replay only.
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
  corral sim --trace 'gen:llm?jobs=800&late=0.5' --queues teams --policies corral,corral-newest`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSim(cmd.OutOrStdout(), cmd.ErrOrStderr(), o, strings.Join(os.Args, " "))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.cluster, "cluster", defaultCluster, "cluster preset or YAML file")
	f.StringVar(&o.trace, "trace", defaultTrace, "trace name, generator or file")
	f.StringVar(&o.protocol, "protocol", "", "fgd or replay (default: fgd for openb traces, else replay)")
	f.StringVar(&o.policies, "policies", "corral,kube,kube-gang,kueue-tas", "comma-separated policies")
	f.StringVar(&o.queues, "queues", "", "queue preset or YAML file (replay)")
	f.StringVar(&o.seeds, "seeds", "42", "seeds: 42, 42,43 or 42-51")
	f.StringVar(&o.out, "out", "corral-report", "folder for report.html and summary.json")
	f.StringVar(&o.jsonFile, "json", "", "also write the JSON summary to this file")
	f.StringVar(&o.failures, "failures", "", `inject failures (replay): "llama3" (published rates), "llama3,scale=200,overhead=5m", or device=R,node=R,device-repair=D,node-repair=D (see docs/simulator.md)`)
	f.StringVar(&o.spares, "spares", "", `spare GPUs corral holds for replacing failed ranks, per domain: "rack=8"`)
	f.StringVar(&o.remediation, "remediation", "", "override every job's remediation policy: RestartGang, ReplaceRanks or WaitForRepair")
	f.BoolVar(&o.noProgress, "no-progress", false, "do not draw progress bars")
	f.IntVar(&o.maxRejections, "show-rejections", 5, "how many rejected jobs to list")
	f.DurationVar(&o.checkpointWait, "checkpoint-wait", 0, "corral: longest wait for preemption victims' next checkpoint (0: the engine default, negative: never wait)")
	f.IntVar(&o.reservations, "reservations", 0, "corral: blocked jobs given a reservation per cycle (0: the engine default)")
	f.IntVar(&o.reservationsPerQueue, "reservations-per-queue", 0, "corral: reservations per queue per cycle (0: the engine default)")
	f.StringVar(&o.onMaxRuntime, "on-max-runtime", "", "Terminate or Requeue a job past its max runtime (default Terminate)")
	f.DurationVar(&o.rendezvous, "rendezvous-timeout", sim.DefaultRendezvous, "replay: a job whose pods have not all started by then fails, frees them and is resubmitted (negative: never)")
	f.DurationVar(&o.migReconfigure, "mig-reconfigure", sim.DefaultMIGReconfigure, "replay: how long a MIG re-partition keeps the GPU out of service (negative: instantaneous, the oracle)")
	f.Float64Var(&o.reserveConfidence, "reserve-confidence", 0, "corral: least confidence (0-1) in a blocked job's expected start to reserve for it before it starves (0: the engine default, 0.7; negative: always)")
	f.DurationVar(&o.starveAfter, "starve-after", 0, "corral: wait after which a job is reserved ahead of everything (0: the engine default, 24h; negative: off)")
	return cmd
}

// parseSeeds reads "42", "42,43" or "42-51".
func parseSeeds(s string) ([]int64, error) {
	var out []int64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if lo, hi, ok := strings.Cut(part, "-"); ok && lo != "" {
			a, err1 := strconv.ParseInt(lo, 10, 64)
			b, err2 := strconv.ParseInt(hi, 10, 64)
			if err1 != nil || err2 != nil || b < a || b-a > 10000 {
				return nil, fmt.Errorf("bad seed range %q", part)
			}
			for v := a; v <= b; v++ {
				out = append(out, v)
			}
			continue
		}
		v, err := strconv.ParseInt(part, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad seed %q", part)
		}
		out = append(out, v)
	}
	return out, nil
}

func parsePolicies(s string) ([]engine.Policy, error) {
	var out []engine.Policy
	for _, p := range strings.Split(s, ",") {
		pol, err := sim.ParsePolicy(strings.TrimSpace(p))
		if err != nil {
			return nil, err
		}
		out = append(out, pol)
	}
	return out, nil
}

func runSim(stdout, stderr io.Writer, o simOptions, command string) error {
	seeds, err := parseSeeds(o.seeds)
	if err != nil {
		return err
	}
	policies, err := parsePolicies(o.policies)
	if err != nil {
		return err
	}
	switch engine.MaxRuntimeAction(o.onMaxRuntime) {
	case "", engine.Terminate, engine.Requeue:
	default:
		return fmt.Errorf("--on-max-runtime %q: want Terminate or Requeue", o.onMaxRuntime)
	}
	spec, err := trace.LoadCluster(o.cluster)
	if err != nil {
		return err
	}
	protocol := sim.Replay
	if strings.HasPrefix(o.trace, "openb:") {
		protocol = sim.FGD
	}
	if o.protocol != "" {
		if protocol, err = sim.ParseProtocol(o.protocol); err != nil {
			return err
		}
	}
	var queues []cycle.QueueSpec
	if o.queues != "" {
		if protocol != sim.Replay {
			return fmt.Errorf("--queues needs the replay protocol (queues divide capacity over time)")
		}
		if queues, err = trace.LoadQueues(o.queues, spec); err != nil {
			return err
		}
	}
	failures, err := sim.ParseFailures(o.failures)
	if err != nil {
		return err
	}
	if failures != nil {
		if failures.Spares, err = cycle.ParseSpares(o.spares); err != nil {
			return err
		}
		if failures.Remediation, err = workload.ParseRemediation(o.remediation); err != nil {
			return err
		}
	} else if o.spares != "" || o.remediation != "" {
		return fmt.Errorf("--spares and --remediation apply only with --failures")
	}
	progress := !o.noProgress && isTerminal(stderr)
	var results []metrics.Result
	var rejected []sim.Rejection
	for _, seed := range seeds {
		tr, err := trace.LoadTrace(o.trace, trace.Options{Seed: seed, Cluster: spec})
		if err != nil {
			return err
		}
		in := sim.Input{ClusterName: o.cluster, Topology: spec.Topology, Nodes: spec.Nodes, TraceName: o.trace, Queues: queues}
		for _, j := range tr.Jobs {
			in.Jobs = append(in.Jobs, sim.Job{Job: j.Job, Runtime: j.Runtime, Checkpoints: sim.Checkpoints{
				Every: j.CheckpointEvery, Jitter: j.CheckpointJitter, Seed: uint64(seed)}})
		}
		for _, pol := range policies {
			cfg := sim.Config{Policy: pol, Protocol: protocol, Seed: seed, Backfill: engine.BackfillConfig{
				MaxReservations: o.reservations, MaxReservationsPerQueue: o.reservationsPerQueue,
				OnMaxRuntime: engine.MaxRuntimeAction(o.onMaxRuntime), StarveAfter: o.starveAfter, ReserveConfidence: o.reserveConfidence},
				CheckpointWait: o.checkpointWait, Failures: failures, Rendezvous: o.rendezvous, MIGReconfigure: o.migReconfigure}
			var bar *progressbar.ProgressBar
			if progress {
				bar = progressbar.NewOptions(100,
					progressbar.OptionSetWriter(stderr),
					progressbar.OptionSetDescription(fmt.Sprintf("%-8s seed %d", pol, seed)),
					progressbar.OptionThrottle(100*time.Millisecond),
					progressbar.OptionClearOnFinish(),
					progressbar.OptionSetWidth(30),
				)
				cfg.Progress = func(done, total int) {
					if total > 0 {
						_ = bar.Set(done * 100 / total)
					}
				}
			} else {
				fmt.Fprintf(stderr, "running %s, seed %d ...\n", pol, seed)
			}
			res, rej, err := sim.Run(in, cfg)
			if bar != nil {
				_ = bar.Finish()
			}
			if err != nil {
				return err
			}
			results = append(results, res)
			if pol == policies[0] && seed == seeds[0] {
				rejected = rej
			}
		}
	}
	if err := report.Table(stdout, results); err != nil {
		return err
	}
	if len(rejected) > 0 {
		fmt.Fprintf(stdout, "\n%d jobs could never be placed on this cluster (they were reported and skipped):\n", len(rejected))
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
	var js bytes.Buffer
	if err := report.WriteJSON(&js, results); err != nil {
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
	meta := report.Meta{Command: command, Machine: machine(), Generated: time.Now()}
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
