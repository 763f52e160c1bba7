// Package sim is the trace-driven driver: a discrete-event simulator that
// feeds the engine snapshots, applies its plans to its own cluster state and
// measures the outcome. Two protocols: fgd (the fragmentation protocol of the
// FGD paper: arrivals only, one pod at a time) and replay (arrivals and
// completions in time).
package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/baseline"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/metrics"
	"github.com/corral-dev/corral/internal/workload"
)

// Protocol names how a trace is driven.
type Protocol string

const (
	// FGD resamples the trace to 130% of GPU capacity, shuffles it and places
	// pods one by one, never removing any (Weng et al., ATC'23).
	FGD Protocol = "fgd"
	// Replay submits jobs at their submit times and ends them after their
	// runtimes.
	Replay Protocol = "replay"
	// FGDOffline is the fgd protocol's workload placed with the whole list
	// known in advance: largest GPU requests first (then CPU), an offline
	// heuristic to compare with, not a bound (nothing proves no placement
	// leaves fewer GPUs unallocated). Only the figure at 130% arrived means
	// anything.
	FGDOffline Protocol = "fgd-offline"
)

// ParseProtocol checks a protocol name.
func ParseProtocol(s string) (Protocol, error) {
	switch Protocol(s) {
	case FGD, Replay, FGDOffline:
		return Protocol(s), nil
	}
	return "", fmt.Errorf("unknown protocol %q (known: fgd, fgd-offline, replay)", s)
}

// Job is a job of the input with what only the simulated workload knows:
// the time it really runs once started and when it really checkpoints.
type Job struct {
	*workload.Job
	Runtime time.Duration // 0: never ends by itself
	// Checkpoints is how the job really checkpoints; the zero value checkpoints
	// exactly every Job.CheckpointInterval (the oracle).
	Checkpoints Checkpoints
}

// Input is what a run reads.
type Input struct {
	ClusterName string
	Topology    cluster.Topology
	Nodes       []cluster.Node
	TraceName   string
	Jobs        []Job
	// Queues is the queue tree the engine sees (replay); empty: no queues.
	Queues []cycle.QueueSpec
}

// Scheduler is what the simulator drives: one cycle, a Snapshot in and a
// Plan out. corral's engine and the baselines (internal/baseline) satisfy it.
type Scheduler interface {
	Cycle(s *engine.Snapshot) engine.Plan
}

// Policies lists every policy the simulator runs, in report order: corral,
// the baselines that model other systems, then corral's ablations.
func Policies() []string {
	out := []string{string(engine.Corral)}
	out = append(out, baseline.Names...)
	for _, p := range []engine.Policy{engine.Spread, engine.Binpack, engine.Greedy, engine.FIFO,
		engine.CorralNewest, engine.CorralConsolidate} {
		out = append(out, string(p))
	}
	return out
}

// ParsePolicy checks a policy name: a baseline or an engine policy.
func ParsePolicy(s string) (engine.Policy, error) {
	if _, ok := baseline.New(s); ok {
		return engine.Policy(s), nil
	}
	if p, err := engine.ParsePolicy(s); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("unknown policy %q (known: %s)", s, strings.Join(Policies(), ", "))
}

// DefaultRendezvous is how long a distributed job waits for all its pods to
// start before it fails: torch.distributed.elastic's rendezvous join timeout
// (600 s by default), the same order as NCCL's default 10-minute timeout.
const DefaultRendezvous = 10 * time.Minute

// DefaultMIGReconfigure is how long a MIG re-partition keeps a GPU out of
// service: draining, then the MIG manager's reconfiguration (see
// docs/simulator.md for the figure's source).
const DefaultMIGReconfigure = 2 * time.Minute

// Config is one run's settings.
type Config struct {
	// Policy names corral, a baseline (internal/baseline) or an ablation;
	// see Policies.
	Policy   engine.Policy
	Protocol Protocol
	Seed     int64
	// Progress, if set, is called now and then with work done and total.
	Progress func(done, total int)
	// Clock measures engine time; nil uses the wall clock. Tests pin it.
	Clock func() time.Time
	// Comm is the communication-slowdown model for replay; zero value uses
	// DefaultComm.
	Comm *CommModel
	// Backfill tunes reservations and runtime limits.
	Backfill engine.BackfillConfig
	// CheckpointWait bounds how long corral's preemption waits for its
	// victims' next checkpoint (engine.Config.CheckpointWait).
	CheckpointWait time.Duration
	// ReclaimMaxLost and ReclaimGrace bound the progress corral's reclaim
	// throws away (engine.Config.ReclaimMaxLost, ReclaimGrace).
	ReclaimMaxLost time.Duration
	ReclaimGrace   time.Duration
	// MaxLostPerWork bounds what corral's priority preemption throws away,
	// as a multiple of the preemptor's expected work
	// (engine.Config.MaxLostPerWork; zero: the default, negative: none).
	MaxLostPerWork float64
	// Failures injects device and node failures into replay; nil: none.
	Failures *FailureModel
	// Rendezvous is how long a job whose pods have not all started keeps
	// the ones that have (replay): then it fails, frees them and is
	// submitted again. Zero means DefaultRendezvous, negative never.
	Rendezvous time.Duration
	// MIGReconfigure is how long a re-partitioned MIG GPU serves nothing
	// (replay). Zero means DefaultMIGReconfigure, negative instantaneous
	// (the oracle).
	MIGReconfigure time.Duration
}

// Rejection is a job the run refused before or while scheduling it.
type Rejection struct {
	Job    workload.JobID
	Source string
	Reason string
}

// Run executes one policy on one input.
func Run(in Input, cfg Config) (metrics.Result, []Rejection, error) {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Comm == nil {
		c := DefaultComm
		cfg.Comm = &c
	}
	state, err := cluster.New(in.Topology, in.Nodes)
	if err != nil {
		return metrics.Result{}, nil, fmt.Errorf("cluster %s: %w", in.ClusterName, err)
	}
	res := metrics.Result{
		Policy: string(cfg.Policy), Seed: cfg.Seed,
		Cluster: in.ClusterName, Trace: in.TraceName, Protocol: string(cfg.Protocol),
	}
	res.Summary.Nodes = state.NumNodes()
	res.Summary.GPUs = state.DomainCapacityGPUs(0, cluster.AllModels)
	res.Summary.CapacityMilli = state.CapacityMilli()
	var eng Scheduler
	if b, ok := baseline.New(string(cfg.Policy)); ok {
		eng = b
	} else {
		if _, err := engine.ParsePolicy(string(cfg.Policy)); err != nil {
			return res, nil, err
		}
		eng = engine.New(engine.Config{Policy: cfg.Policy, Backfill: cfg.Backfill, CheckpointWait: cfg.CheckpointWait,
			ReclaimMaxLost: cfg.ReclaimMaxLost, ReclaimGrace: cfg.ReclaimGrace, MaxLostPerWork: cfg.MaxLostPerWork})
	}
	if cfg.Rendezvous == 0 {
		cfg.Rendezvous = DefaultRendezvous
	}
	if cfg.MIGReconfigure == 0 {
		cfg.MIGReconfigure = DefaultMIGReconfigure
	}
	if cfg.Failures != nil {
		in.Jobs = withFailurePolicy(in.Jobs, *cfg.Failures)
		if cfg.Failures.Remediation != "" {
			res.Policy += "+" + string(cfg.Failures.Remediation)
		}
	}
	start := time.Now()
	var rej []Rejection
	switch cfg.Protocol {
	case FGD, FGDOffline:
		rej, err = runFGD(state, eng, in.Jobs, cfg, &res)
	case Replay:
		rej, err = runReplay(state, eng, in.Jobs, in.Queues, cfg, &res)
	default:
		err = fmt.Errorf("unknown protocol %q", cfg.Protocol)
	}
	res.Summary.WallSeconds = time.Since(start).Seconds()
	return res, rej, err
}

// repartition carries out a plan's MIG re-partitions at once: the
// simulator's MIG manager is instantaneous, so the GPUs have their new
// layouts before the next cycle.
func repartition(s *cluster.State, plan engine.Plan, res *metrics.Result) error {
	for _, rp := range plan.Repartitions {
		if err := s.SetMIGLayout(rp.NodeIndex, rp.DeviceIndex, rp.Layout, false); err != nil {
			return fmt.Errorf("plan's re-partition of %s/%s does not apply: %w", rp.Node, rp.Device, err)
		}
		res.Summary.MIGRepartitions++
	}
	return nil
}

// apply carries out one bind decision on the driver's state.
func apply(s *cluster.State, b engine.GangBind) error {
	for i, p := range b.Pods {
		if err := s.Allocate(p.NodeIndex, p.Alloc); err != nil {
			for _, q := range b.Pods[:i] {
				s.Release(q.NodeIndex, q.Alloc)
			}
			return fmt.Errorf("plan for %s does not apply: %w", b.Job, err)
		}
	}
	return nil
}

func pct(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}
