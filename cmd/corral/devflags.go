package main

import (
	"fmt"

	"github.com/corral-dev/corral/api/v1alpha1"
)

// maxDevNodes bounds a local cluster's nodes.
const maxDevNodes = 2000

// validate checks dev up's flags before anything starts. The scheduler's
// flags it shares with corral scheduler (--cycle-interval, the addresses)
// are checked by the same rules: a zero interval is not silently 1s, an
// address that cannot be served or one port for both fails here, not once
// the control plane is up.
func (o devUpOptions) validate() error {
	for _, f := range []struct {
		flag string
		v    int
	}{{"--blocks", o.blocks}, {"--racks", o.racks}, {"--nodes", o.nodes}} {
		// Each bounded first: their product could overflow.
		if f.v < 1 || f.v > maxDevNodes {
			return fmt.Errorf("%s %d: want 1-%d", f.flag, f.v, maxDevNodes)
		}
	}
	if total := o.blocks * o.racks * o.nodes; total > maxDevNodes {
		return fmt.Errorf("%d nodes: at most %d for a local cluster", total, maxDevNodes)
	}
	switch o.mode() {
	case "mixed", "extended", "dra":
	default:
		return fmt.Errorf("--gpu-mode %q: want mixed, extended or dra", o.gpuMode)
	}
	if o.gpus < 1 || o.gpus > 128 {
		return fmt.Errorf("--gpus %d: want 1-128", o.gpus)
	}
	if o.startTimeout <= 0 {
		return fmt.Errorf("--start-timeout %s: must be a positive duration", o.startTimeout)
	}
	if o.kubeconfigOut == "" {
		return fmt.Errorf("--kubeconfig-out: must not be empty (default corral-dev.kubeconfig)")
	}
	if err := checkFileWritable("--kubeconfig-out", o.kubeconfigOut); err != nil {
		return err
	}
	sched := schedulerOptions{name: v1alpha1.SchedulerName, gpuResource: v1alpha1.DefaultGPUResourceName,
		draDriver: v1alpha1.DefaultDRADriver, cycle: o.cycle, metricsAddr: o.metricsAddr, healthAddr: o.healthAddr,
		qps: 200, burst: 400}
	return sched.validate()
}
