// Command corral is the scheduler's one binary: the simulator (sim,
// compare), the Kubernetes scheduler (scheduler), explain, bench, a local
// development cluster (dev), the read-only views of a cluster (jobs, queues,
// nodes; also run as the kubectl plugin kubectl-corral) and version. There
// is no node agent.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral-dev/corral/internal/version"
)

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
	root.AddCommand(newSimCmd(), newSchedulerCmd(), newExplainCmd(), newBenchCmd(), newCompareCmd(), newDevCmd(), newVersionCmd(),
		newJobsCmd(time.Now), newQueuesCmd(), newNodesCmd())
	if asPlugin() {
		// kubectl corral ...: kubectl runs this binary as kubectl-corral.
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl corral"}
	}
	return root
}

func newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the corral version",
		Long: `Print the release this binary was built from (set by make build and the
image build from git describe), the commit when the toolchain recorded it,
the Go version and the platform. A binary built from a work tree without
them says "dev".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := version.Get()
			switch output {
			case "":
				fmt.Fprintln(cmd.OutOrStdout(), "corral", v)
			case "json":
				b, err := json.MarshalIndent(v, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
			default:
				return fmt.Errorf("-o %q: want json, or nothing for one line", output)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json for a machine-readable form")
	return cmd
}
