package workload

import "fmt"

// CPUText renders milli-CPU as Kubernetes writes a CPU quantity, the unit
// users wrote in their pods: whole cores as "4 CPU", anything else in milli
// as "500m CPU" (never "4000m CPU").
func CPUText(milli int64) string {
	if milli%1000 == 0 {
		return fmt.Sprintf("%d CPU", milli/1000)
	}
	return fmt.Sprintf("%dm CPU", milli)
}
