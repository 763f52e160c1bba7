package workload

import (
	"fmt"
	"strconv"
)

// CPUText renders milli-CPU as Kubernetes writes a CPU quantity, the unit
// users wrote in their pods: whole cores as "4 CPU", anything else in milli
// as "500m CPU" (never "4000m CPU").
func CPUText(milli int64) string {
	if milli%1000 == 0 {
		return fmt.Sprintf("%d CPU", milli/1000)
	}
	return fmt.Sprintf("%dm CPU", milli)
}

// MemText renders MiB as users write memory: whole GiB as "80 GiB" (a pod's
// 100Gi, a GPU's 81920 MiB), anything else in MiB.
func MemText(mib int64) string {
	if mib != 0 && mib%1024 == 0 {
		return fmt.Sprintf("%d GiB", mib/1024)
	}
	return fmt.Sprintf("%d MiB", mib)
}

// GPUNumber renders milli-GPUs as a plain decimal number of GPUs, exact and
// never with an exponent: 40 → "0.04", 12500 → "12.5", a million GPUs
// "1000000" (not 1e+06).
func GPUNumber(milli int64) string {
	return strconv.FormatFloat(float64(milli)/MilliPerGPU, 'f', -1, 64)
}

// GPUText is GPUNumber with its unit: "0.04 GPUs", "8 GPUs".
func GPUText(milli int64) string {
	return GPUNumber(milli) + " GPUs"
}
