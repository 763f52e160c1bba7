package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// execute runs one command of corral with args and returns its error.
func execute(cmd *cobra.Command, args ...string) error {
	root := &cobra.Command{Use: "corral", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(cmd)
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs(args)
	return root.Execute()
}

// TestSchedulerFlagsCheckedFirst: a nonsense flag of corral scheduler is an
// error naming the flag, before the kubeconfig is read (it does not exist
// here: an error about it would mean the flag went through), where before
// the adapter put its default in place (--cycle-interval -1s ran at 1s) or
// the scheduler failed later (--metrics-address equal to --health-address).
func TestSchedulerFlagsCheckedFirst(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--cycle-interval", "-1s"}, "--cycle-interval -1s: must be a positive duration"},
		{[]string{"--cycle-interval", "0"}, "--cycle-interval 0s: must be a positive duration"},
		{[]string{"--scheduler-name", ""}, `--scheduler-name "": a lowercase RFC 1123 subdomain`},
		{[]string{"--gpu-resource", "gpu"}, "--gpu-resource gpu: an extended resource needs a domain prefix, e.g. nvidia.com/gpu"},
		{[]string{"--dra-driver", "GPU_Driver"}, "--dra-driver GPU_Driver: a lowercase RFC 1123 subdomain"},
		{[]string{"--topology", "Racks"}, "--topology Racks: a lowercase RFC 1123 subdomain"},
		{[]string{"--node-selector", "pool in ("}, "--node-selector pool in (: unable to parse requirement"},
		{[]string{"--metrics-address", ":8081"}, "--health-address :8081: must differ from --metrics-address"},
		{[]string{"--health-address", "8081"}, `--health-address 8081: want host:port, e.g. ":8080"`},
		{[]string{"--leader-elect-lease-duration", "-15s"}, "--leader-elect-lease-duration -15s: must be a positive duration"},
		{[]string{"--leader-elect-renew-deadline", "20s"}, "--leader-elect-lease-duration 15s: must be greater than --leader-elect-renew-deadline"},
		{[]string{"--leader-elect-retry-period", "9s"}, "--leader-elect-renew-deadline 10s: must be greater than 1.2 × --leader-elect-retry-period"},
		{[]string{"--leader-elect-namespace", "Corral"}, "--leader-elect-namespace Corral: a lowercase RFC 1123 label"},
		{[]string{"--reservations-per-queue", "-1"}, "--reservations-per-queue -1: must not be negative"},
		{[]string{"--reclaim-grace", "-1h"}, "--reclaim-grace -1h0m0s: must not be negative"},
		{[]string{"--max-lost-per-work", "NaN"}, `--max-lost-per-work NaN: want a decimal number such as 2 or "2.5"`},
		{[]string{"--max-lost-per-work", "Inf"}, `--max-lost-per-work +Inf: want a decimal number such as 2 or "2.5"`},
		{[]string{"--on-max-runtime", "Kill"}, `--on-max-runtime "Kill": want Terminate or Requeue`},
		{[]string{"--kube-api-qps", "-1"}, "--kube-api-qps -1: must be positive"},
		{[]string{"--kube-api-burst", "0"}, "--kube-api-burst 0: must be at least 1"},
		{[]string{"--spares", "rack=-8"}, `--spares: spares: bad item "rack=-8"`},
		{[]string{"--log-level", "loud"}, `--log-level: slog: level string "loud": unknown name`},
	} {
		args := append([]string{"scheduler", "--kubeconfig", filepath.Join(t.TempDir(), "none")}, tc.flags...)
		err := execute(newSchedulerCmd(), args...)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("corral %s: error %v, want one starting %q", strings.Join(tc.flags, " "), err, tc.want)
		}
	}
	// With leader election off, its durations are not checked; the flags
	// pass, and the missing kubeconfig is what fails.
	err := execute(newSchedulerCmd(), "scheduler", "--kubeconfig", "/none", "--leader-elect=false", "--leader-elect-retry-period", "0",
		"--metrics-address", "", "--health-address", "0")
	if err == nil || !strings.Contains(err.Error(), "/none") {
		t.Errorf("valid flags: error %v, want the kubeconfig's", err)
	}
}

// TestDevFlagsCheckedFirst: dev up checks its flags before it starts a
// control plane: counts each bounded (their product overflowed: 2^32
// blocks of 2^32 racks made 0 nodes, under the 2000-node cap), the scheduler's flags
// by corral scheduler's rules (--cycle-interval 0 ran at 1s, one port for
// both addresses failed once the cluster was up), a kubeconfig it can write.
func TestDevFlagsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	valid := devUpOptions{blocks: 2, racks: 2, nodes: 4, gpus: 8, gpuMode: "mixed", cycle: time.Second,
		startTimeout: time.Minute, kubeconfigOut: filepath.Join(dir, "k"), logLevel: "info"}
	for name, tc := range map[string]struct {
		edit func(*devUpOptions)
		want string
	}{
		"overflowing counts":  {func(o *devUpOptions) { o.blocks, o.racks, o.nodes = 1<<32, 1<<32, 1 }, "--blocks 4294967296: want 1-2000"},
		"too many nodes":      {func(o *devUpOptions) { o.blocks, o.racks, o.nodes = 10, 10, 21 }, "2100 nodes: at most 2000 for a local cluster"},
		"no racks":            {func(o *devUpOptions) { o.racks = 0 }, "--racks 0: want 1-2000"},
		"no GPUs":             {func(o *devUpOptions) { o.gpus = 0 }, "--gpus 0: want 1-128"},
		"unknown GPU mode":    {func(o *devUpOptions) { o.gpuMode = "mig" }, `--gpu-mode "mig": want mixed, extended or dra`},
		"zero cycle interval": {func(o *devUpOptions) { o.cycle = 0 }, "--cycle-interval 0s: must be a positive duration"},
		"negative timeout":    {func(o *devUpOptions) { o.startTimeout = -time.Second }, "--start-timeout -1s: must be a positive duration"},
		"one port for both":   {func(o *devUpOptions) { o.metricsAddr, o.healthAddr = ":9000", ":9000" }, "--health-address :9000: must differ from --metrics-address"},
		"no kubeconfig":       {func(o *devUpOptions) { o.kubeconfigOut = "" }, "--kubeconfig-out: must not be empty"},
		"kubeconfig a folder": {func(o *devUpOptions) { o.kubeconfigOut = dir }, "--kubeconfig-out " + dir + ": is a folder, want a file"},
	} {
		t.Run(name, func(t *testing.T) {
			o := valid
			tc.edit(&o)
			if err := o.validate(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want one starting %q", err, tc.want)
			}
		})
	}
	valid.metricsAddr, valid.healthAddr = "127.0.0.1:8080", "0"
	if err := valid.validate(); err != nil {
		t.Errorf("valid flags: %v", err)
	}
}

// TestExplainFlagsCheckedFirst: explain refuses a bad -o and a pod name with
// a slash before it connects (it used to spend up to a minute failing to
// reach the cluster, or print text for -o yaml).
func TestExplainFlagsCheckedFirst(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"team-a/train-0", "-o", "yaml"}, `-o "yaml": want text or json`},
		{[]string{"team-a/train/0"}, `want NAMESPACE/POD, got "team-a/train/0"`},
		{[]string{"/train-0"}, `want NAMESPACE/POD, got "/train-0"`},
		{[]string{"team-a/train-0", "--scheduler-name", ""}, `--scheduler-name: must not be empty (default corral)`},
	} {
		args := append([]string{"explain", "--kubeconfig", "/none"}, tc.args...)
		if err := execute(newExplainCmd(), args...); err == nil || err.Error() != tc.want {
			t.Errorf("corral explain %s: error %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// TestBenchFlagsCheckedFirst: bench e2e checks its flags before it starts a
// control plane: a count below 1 left it waiting for nodes that never
// came (--workers 0), a --json that cannot be written lost the results.
func TestBenchFlagsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	valid := e2eOptions{nodes: 10, gpusPerNode: 8, pods: 20, gangs: 4, gangSize: 8, workers: 4, qps: 100}
	for name, tc := range map[string]struct {
		edit func(*e2eOptions)
		want string
	}{
		"no workers":        {func(o *e2eOptions) { o.workers = 0 }, "--workers 0: must be at least 1"},
		"negative nodes":    {func(o *e2eOptions) { o.nodes = -5 }, "--nodes -5: must be at least 1"},
		"no gang size":      {func(o *e2eOptions) { o.gangSize = 0 }, "--gang-size 0: must be at least 1"},
		"zero qps":          {func(o *e2eOptions) { o.qps = 0 }, "--qps 0: must be at least 1"},
		"too few GPUs":      {func(o *e2eOptions) { o.nodes = 2 }, "--nodes 2 × --gpus-per-node 8 = 16 GPUs, below the 72 single-GPU pods"},
		"json in no folder": {func(o *e2eOptions) { o.jsonFile = filepath.Join(dir, "no", "e2e.json") }, "--json " + filepath.Join(dir, "no", "e2e.json") + ": folder"},
		"json is a folder":  {func(o *e2eOptions) { o.jsonFile = dir }, "--json " + dir + ": is a folder, want a file"},
	} {
		t.Run(name, func(t *testing.T) {
			o := valid
			tc.edit(&o)
			if err := o.validate(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want one starting %q", err, tc.want)
			}
		})
	}
	valid.jsonFile = filepath.Join(dir, "e2e.json")
	if err := valid.validate(); err != nil {
		t.Errorf("valid flags: %v", err)
	}
}

// TestPreemptionSettingsReachTheEngine: the configuration file's preemption
// section reaches the adapter's options, and a flag given beside it wins.
func TestPreemptionSettingsReachTheEngine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	body := "apiVersion: corral.dev/v1alpha1\nkind: SchedulerConfiguration\npreemption:\n  checkpointWait: 5m\n  reclaimMaxLost: 2h\n  reclaimGrace: 12h\n  maxLostPerWork: 2.5\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		flags       map[string]bool
		wantGrace   time.Duration
		wantMaxLost float64
	}{
		"from the file":           {wantGrace: 12 * time.Hour, wantMaxLost: 2.5},
		"a flag beside it wins":   {flags: map[string]bool{"reclaim-grace": true}, wantGrace: 3 * time.Hour, wantMaxLost: 2.5},
		"the lost-work flag wins": {flags: map[string]bool{"max-lost-per-work": true}, wantGrace: 12 * time.Hour, wantMaxLost: -1},
	} {
		t.Run(name, func(t *testing.T) {
			o := schedulerOptions{config: path, reclaimGrace: 3 * time.Hour, maxLostPerWork: -1}
			if err := applyConfigFile(&o, func(f string) bool { return tc.flags[f] }); err != nil {
				t.Fatal(err)
			}
			opts, err := o.adapterOptions()
			if err != nil {
				t.Fatal(err)
			}
			if opts.CheckpointWait != 5*time.Minute || opts.ReclaimMaxLost != 2*time.Hour || opts.ReclaimGrace != tc.wantGrace {
				t.Errorf("options: checkpoint wait %v, reclaim max lost %v, grace %v; want 5m, 2h, %v",
					opts.CheckpointWait, opts.ReclaimMaxLost, opts.ReclaimGrace, tc.wantGrace)
			}
			if opts.MaxLostPerWork != tc.wantMaxLost {
				t.Errorf("options: max lost per work %v, want %v", opts.MaxLostPerWork, tc.wantMaxLost)
			}
		})
	}
}
