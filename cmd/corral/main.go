// Command corral is the scheduler's one binary: the simulator (sim, compare),
// the Kubernetes scheduler (scheduler), explain, bench, a local development
// cluster (dev) and version. There is no node agent.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "corral",
		Short: "corral: a batch scheduler for AI workloads on Kubernetes",
		Long: `corral places GPU jobs as whole gangs, in the tightest topology domain that
holds them, on GPUs chosen by interconnect distance, while keeping free capacity
useful for the jobs that are expected next.

Start with 'corral sim': it runs corral and the baselines on a bundled cluster
and trace and writes a report.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newSimCmd(), newSchedulerCmd(), newExplainCmd(), newBenchCmd(), newCompareCmd(), newDevCmd(), newVersionCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the corral version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "corral", version)
		},
	}
}
