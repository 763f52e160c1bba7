package workload

import "testing"

func TestCPUText(t *testing.T) {
	for milli, want := range map[int64]string{
		0: "0 CPU", 500: "500m CPU", 1000: "1 CPU", 1500: "1500m CPU", 96000: "96 CPU", -5: "-5m CPU", -2000: "-2 CPU",
	} {
		if got := CPUText(milli); got != want {
			t.Errorf("CPUText(%d) = %q, want %q", milli, got, want)
		}
	}
}

func TestMemText(t *testing.T) {
	for mib, want := range map[int64]string{
		0: "0 MiB", 512: "512 MiB", 1024: "1 GiB", 1536: "1536 MiB", 81920: "80 GiB", 102400: "100 GiB", -2048: "-2 GiB",
	} {
		if got := MemText(mib); got != want {
			t.Errorf("MemText(%d) = %q, want %q", mib, got, want)
		}
	}
}

func TestGPUText(t *testing.T) {
	for milli, want := range map[int64]string{
		0: "0 GPUs", 40: "0.04 GPUs", 1125: "1.125 GPUs", 8000: "8 GPUs", 12500: "12.5 GPUs", 1_000_000_000: "1000000 GPUs",
	} {
		if got := GPUText(milli); got != want {
			t.Errorf("GPUText(%d) = %q, want %q", milli, got, want)
		}
	}
}
