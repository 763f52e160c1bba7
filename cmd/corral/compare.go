package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corral-dev/corral/internal/report"
)

func newCompareCmd() *cobra.Command {
	var metric string
	cmd := &cobra.Command{
		Use:   "compare BASE.json:POLICY OTHER.json:POLICY...",
		Short: "Compare runs of corral sim seed by seed against a baseline",
		Long: `compare reads the JSON summaries that corral sim --json writes and compares
one metric of each row with the first (the baseline), seed by seed: runs with
the same seed had the same input (and failure stream), so the differences are
paired. It prints each row's mean, its total against the baseline's, the
seeds on which it is lower, and the paired t statistic.`,
		Example: "  corral compare --metric failure_lost_gpu_hours kube.json:spread+RestartGang rr.json:corral",
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var rows []report.SeedRuns
			for _, a := range args {
				file, policy, ok := strings.Cut(a, ":")
				if !ok || file == "" || policy == "" {
					return fmt.Errorf("want FILE.json:POLICY, got %q", a)
				}
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				r, err := report.ReadSeedRuns(f, a, policy)
				f.Close()
				if err != nil {
					return err
				}
				rows = append(rows, r)
			}
			ps, err := report.Paired(metric, rows[0], rows[1:]...)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "| row | seeds | mean %s | vs baseline | seeds lower | paired t |\n|---|---|---|---|---|---|\n", metric)
			for i, p := range ps {
				if i == 0 {
					fmt.Fprintf(w, "| %s (baseline) | %d | %.1f | | | |\n", p.Name, p.Seeds, p.Mean)
					continue
				}
				fmt.Fprintf(w, "| %s | %d | %.1f | %+.1f%% | %d of %d | %.1f |\n", p.Name, p.Seeds, p.Mean, 100*p.Change, p.Lower, p.Seeds, p.T)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&metric, "metric", "failure_lost_gpu_hours", "the summary key to compare (docs/metrics.md)")
	return cmd
}
