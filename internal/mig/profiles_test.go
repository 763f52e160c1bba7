package mig

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// model returns the geometry called name, failing the test if there is none.
func model(t *testing.T, name string) Model {
	t.Helper()
	m, ok := Lookup(name)
	if !ok {
		t.Fatalf("Lookup(%q) found nothing", name)
	}
	return m
}

// lay builds a layout from "profile@start" strings.
func lay(t *testing.T, instances ...string) Layout {
	t.Helper()
	l := Layout{}
	for _, s := range instances {
		name, start, ok := strings.Cut(s, "@")
		var n int
		if _, err := fmt.Sscan(start, &n); !ok || err != nil {
			t.Fatalf("bad instance %q", s)
		}
		l = append(l, Instance{Profile: name, Start: n})
	}
	return l
}

func TestLookup(t *testing.T) {
	cases := map[string]string{ // product -> model name, "" for none
		"NVIDIA A100-SXM4-40GB":             "A100-40GB", // NVML
		"A100-SXM4-40GB":                    "A100-40GB", // older drivers
		"NVIDIA-A100-SXM4-40GB":             "A100-40GB", // GFD label
		"NVIDIA-A100-SXM4-40GB-MIG-1g.5gb":  "A100-40GB", // GFD, single strategy
		"NVIDIA A100-PCIE-40GB":             "A100-40GB",
		"a100-40gb":                         "A100-40GB",
		"NVIDIA A100-SXM4-80GB":             "A100-80GB",
		"NVIDIA A100 80GB PCIe":             "A100-80GB",
		"NVIDIA-A100-80GB-PCIe":             "A100-80GB",
		"A100-80GB":                         "A100-80GB",
		"NVIDIA H100 80GB HBM3":             "H100-80GB",
		"NVIDIA-H100-80GB-HBM3":             "H100-80GB",
		"NVIDIA-H100-80GB-HBM3-MIG-3g.40gb": "H100-80GB",
		"NVIDIA H100 PCIe":                  "H100-80GB",
		"H100":                              "H100-80GB",
		"NVIDIA H200":                       "H200-141GB",
		"NVIDIA-H200-SHARED":                "H200-141GB", // GFD under time-slicing
		"NVIDIA H200 NVL":                   "H200-141GB",
		"H200":                              "H200-141GB",
		"A100":                              "", // 40 or 80 GB: ambiguous
		"NVIDIA H100 NVL":                   "", // 94GB: other profiles
		"NVIDIA A30":                        "",
		"Tesla T4":                          "",
		"":                                  "",
	}
	for product, want := range cases {
		t.Run(product, func(t *testing.T) {
			m, ok := Lookup(product)
			if ok != (want != "") || m.Name != want {
				t.Errorf("Lookup(%q) = %q, %v; want %q", product, m.Name, ok, want)
			}
		})
	}
}

func TestLookupReturnsACopy(t *testing.T) {
	m := model(t, "H100")
	m.Profiles[0].Starts[0] = 5
	m.Profiles[1].MaxCount = 9
	if again := model(t, "H100"); again.Profiles[0].Starts[0] != 0 || again.Profiles[1].MaxCount != 1 {
		t.Errorf("editing a looked-up model changed the table: %+v", again.Profiles[:2])
	}
}

// TestTables checks each table against itself: names agree with the slices
// and memory recorded, and the starts respect the geometry the placement
// code assumes.
func TestTables(t *testing.T) {
	for _, m := range Models() {
		t.Run(m.Name, func(t *testing.T) {
			if len(m.Profiles) != 7 {
				t.Fatalf("%d profiles, want 7", len(m.Profiles))
			}
			for _, p := range m.Profiles {
				var g, gb int
				base, me := strings.CutSuffix(p.Name, "+me")
				if _, err := fmt.Sscanf(base, "%dg.%dgb", &g, &gb); err != nil {
					t.Errorf("%s: name does not parse: %v", p.Name, err)
				}
				if g != p.Compute || gb != p.MemoryGB {
					t.Errorf("%s: compute %d, memory %d GB; the name says %d and %d", p.Name, p.Compute, p.MemoryGB, g, gb)
				}
				if p.ReportedGiB <= 0 || p.ReportedGiB > float64(p.MemoryGB) {
					t.Errorf("%s: reported %.2f GiB against %d GB nominal", p.Name, p.ReportedGiB, p.MemoryGB)
				}
				wantMax := len(p.Starts)
				if me {
					wantMax = 1
				}
				if p.MaxCount != wantMax {
					t.Errorf("%s: max count %d, want %d", p.Name, p.MaxCount, wantMax)
				}
				if !slices.IsSorted(p.Starts) {
					t.Errorf("%s: starts %v not ascending", p.Name, p.Starts)
				}
				var seen mask
				for _, s := range p.Starts {
					span := p.span(s)
					if s < 0 || s+p.Memory > MemorySlices {
						t.Errorf("%s@%d runs past slice %d", p.Name, s, MemorySlices-1)
					}
					if s%p.Memory != 0 && p.Memory > 1 {
						t.Errorf("%s@%d is not aligned to its size %d", p.Name, s, p.Memory)
					}
					if seen&span != 0 { // headroom counts free starts as simultaneous instances
						t.Errorf("%s: starts %v overlap each other", p.Name, p.Starts)
					}
					seen |= span
				}
			}
		})
	}
}
