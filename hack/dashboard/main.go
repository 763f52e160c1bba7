// Command dashboard writes corral's Grafana dashboard (internal/dashboard)
// where it is shipped: deploy/dashboards/corral.json for kubectl and
// Grafana provisioning, and charts/corral/dashboards/corral.json for the Helm
// chart, which can only read files inside itself. Run from the repository
// root: go run ./hack/dashboard (or make dashboard).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/corral-dev/corral/internal/dashboard"
)

func main() {
	b, err := dashboard.JSON()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, p := range dashboard.Files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("wrote", p)
	}
}
