package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-dev/corral/internal/kube"
)

func newExplainCmd() *cobra.Command {
	var kubeconfig, schedulerName, topology, output, config string
	cmd := &cobra.Command{
		Use:   "explain NAMESPACE/POD",
		Short: "Say why a pod's job is pending and what would have to change",
		Long: `explain reads the cluster as the scheduler does, runs one cycle without writing
anything, and prints the state of the pod's job (its gang, shape and topology
constraint), the reason it waits, and what would let it start.`,
		Example: "  corral explain team-a/train-0\n  corral explain team-a/train-0 -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, pod, ok := strings.Cut(args[0], "/")
			if !ok || ns == "" || pod == "" || strings.Contains(pod, "/") {
				return fmt.Errorf("want NAMESPACE/POD, got %q", args[0])
			}
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %q: want text or json", output)
			}
			if err := noEmptyNames(cmd.Flags()); err != nil {
				return err
			}
			// With --config, explain sees what the scheduler sees: its
			// name, topology, spares, pools and backfill settings (flags
			// given here win).
			o := schedulerOptions{name: schedulerName, topology: topology, config: config}
			if err := applyConfigFile(&o, cmd.Flags().Changed); err != nil {
				return err
			}
			opts, err := o.adapterOptions()
			if err != nil {
				return err
			}
			opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			client, dyn, err := clientsFor(cfg)
			if err != nil {
				return err
			}
			s, err := kube.New(client, dyn, opts)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 60*time.Second)
			defer cancel()
			e, err := s.Explain(ctx, ns, pod)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(e)
			}
			printExplanation(cmd.OutOrStdout(), e)
			return nil
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, then $KUBECONFIG)")
	cmd.Flags().StringVar(&schedulerName, "scheduler-name", "corral", "the scheduler's name")
	cmd.Flags().StringVar(&topology, "topology", "", "Topology object (default: the only one)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	cmd.Flags().StringVar(&config, "config", "", "the scheduler's SchedulerConfiguration file, to explain with its spares, pools and backfill settings")
	return cmd
}

func printExplanation(w io.Writer, e *kube.Explanation) {
	fmt.Fprintf(w, "Pod:    %s/%s\n", e.Namespace, e.Pod)
	fmt.Fprintf(w, "Job:    %s: %s, gang minimum %d, %d of %d pods bound\n", e.Job, e.Shape, e.GangMin, e.Bound, e.Pods)
	if e.GangNote != "" {
		fmt.Fprintf(w, "Gang:   %s\n", e.GangNote)
	}
	if e.Required != "" || e.Preferred != "" {
		fmt.Fprintf(w, "Topology: required %q, preferred %q\n", e.Required, e.Preferred)
	}
	fmt.Fprintf(w, "State:  %s\n", e.State)
	if e.Node != "" {
		fmt.Fprintf(w, "Node:   %s", e.Node)
		if e.GPUs != "" {
			fmt.Fprintf(w, " (GPUs %s)", e.GPUs)
		}
		fmt.Fprintln(w)
	}
	if e.Reason != "" {
		fmt.Fprintf(w, "Why:    %s\n", e.Reason)
	}
	for i, s := range e.Suggestions {
		if i == 0 {
			fmt.Fprintln(w, "What would change it:")
		}
		fmt.Fprintf(w, "  - %s\n", s)
	}
	for _, s := range e.Warnings {
		fmt.Fprintf(w, "Warning: %s\n", s)
	}
}
