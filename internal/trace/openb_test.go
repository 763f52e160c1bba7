package trace

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/workload"
)

// podRow is one pod-list row by column; set returns a changed copy.
type podRow map[string]string

var openbHeader = append(append([]string{}, openbRequired...), openbOptional...)

func openbPod() podRow {
	return podRow{
		"name": "p0", "cpu_milli": "8000", "memory_mib": "16384", "num_gpu": "1", "gpu_milli": "1000",
		"gpu_spec": "", "qos": "LS", "pod_phase": "Running",
		"creation_time": "100", "deletion_time": "700", "scheduled_time": "160",
	}
}

func (r podRow) set(kv ...string) podRow {
	out := podRow{}
	for k, v := range r {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// openbCSV renders rows under the full openb header.
func openbCSV(rows ...podRow) string {
	var b strings.Builder
	b.WriteString(strings.Join(openbHeader, ",") + "\n")
	for _, r := range rows {
		var vals []string
		for _, c := range openbHeader {
			vals = append(vals, r[c])
		}
		b.WriteString(strings.Join(vals, ",") + "\n")
	}
	return b.String()
}

func TestOpenbDefault(t *testing.T) {
	tr, err := LoadTrace("openb:default", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Jobs) != 8152 {
		t.Errorf("openb:default has %d jobs, want 8152", len(tr.Jobs))
	}
	// openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061
	j := tr.Jobs[1]
	want := &workload.Job{
		ID: "openb-pod-0001", Queue: "default", Submit: Epoch.Add(427061 * time.Second),
		PodSets: []workload.PodSet{{Name: "main", Count: 1, Request: workload.Request{CPUMilli: 6000, MemMiB: 12288, GPUs: 1, GPUMilli: 460}}},
		Source:  "data/openb/openb_pod_list_default.csv:3",
	}
	if diff := cmp.Diff(want, j.Job); diff != "" {
		t.Errorf("fraction row (-want +got):\n%s", diff)
	}
	if want := (12902960 - 427061) * time.Second; j.Runtime != want || j.Line != 3 {
		t.Errorf("runtime %v line %d, want %v line 3", j.Runtime, j.Line, want)
	}
}

func TestOpenbVariants(t *testing.T) {
	cases := map[string]int{"openb:gpushare40": 8152, "openb:multigpu20": 8324, "openb:gpuspec10": 8152, "openb:cpu050": 7439}
	for spec, want := range cases {
		t.Run(spec, func(t *testing.T) {
			tr, err := LoadTrace(spec, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Jobs) != want || tr.Name != spec {
				t.Errorf("%s: %d jobs named %q, want %d", spec, len(tr.Jobs), tr.Name, want)
			}
			if spec == "openb:multigpu20" {
				for _, j := range tr.Jobs {
					if !j.Submit.Equal(Epoch) || j.Runtime != 0 {
						t.Fatalf("%s: submit %v runtime %v; multigpu20 has no times", j.ID, j.Submit, j.Runtime)
					}
				}
			}
		})
	}
}

func TestReadOpenbCSV(t *testing.T) {
	cases := map[string]struct {
		row     podRow
		req     workload.Request
		submit  time.Duration
		runtime time.Duration
	}{
		"whole GPU, deletion - scheduled": {openbPod(), workload.Request{CPUMilli: 8000, MemMiB: 16384, GPUs: 1}, 100 * time.Second, 540 * time.Second},
		"fraction":                        {openbPod().set("gpu_milli", "250"), workload.Request{CPUMilli: 8000, MemMiB: 16384, GPUs: 1, GPUMilli: 250}, 100 * time.Second, 540 * time.Second},
		"multi-GPU":                       {openbPod().set("num_gpu", "8"), workload.Request{CPUMilli: 8000, MemMiB: 16384, GPUs: 8}, 100 * time.Second, 540 * time.Second},
		"CPU only":                        {openbPod().set("num_gpu", "0", "gpu_milli", "0"), workload.Request{CPUMilli: 8000, MemMiB: 16384}, 100 * time.Second, 540 * time.Second},
		"models":                          {openbPod().set("gpu_spec", "V100M16|V100M32"), workload.Request{CPUMilli: 8000, MemMiB: 16384, GPUs: 1, Models: []string{"V100M16", "V100M32"}}, 100 * time.Second, 540 * time.Second},
		"pending: deletion - creation":    {openbPod().set("scheduled_time", ""), workload.Request{CPUMilli: 8000, MemMiB: 16384, GPUs: 1}, 100 * time.Second, 600 * time.Second},
		"never deleted: runs forever":     {openbPod().set("deletion_time", ""), workload.Request{CPUMilli: 8000, MemMiB: 16384, GPUs: 1}, 100 * time.Second, 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tr, err := ReadOpenbCSV(strings.NewReader(openbCSV(tc.row)), "p.csv")
			if err != nil {
				t.Fatal(err)
			}
			j := tr.Jobs[0]
			if diff := cmp.Diff(tc.req, j.PodSets[0].Request); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			if got := j.Submit.Sub(Epoch); got != tc.submit || j.Runtime != tc.runtime {
				t.Errorf("submit %v runtime %v, want %v %v", got, j.Runtime, tc.submit, tc.runtime)
			}
		})
	}
}

func TestReadOpenbCSVErrors(t *testing.T) {
	ok := openbPod()
	cases := map[string]struct{ doc, want string }{
		"missing column":       {"name,cpu_milli,memory_mib,num_gpu\n", `p.csv:1: missing column "gpu_milli"`},
		"unknown column":       {"name,cpu_milli,memory_mib,num_gpu,gpu_milli,owner\n", `p.csv:1: unknown column "owner" (known: name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time)`},
		"negative GPUs":        {openbCSV(ok, ok.set("name", "p1", "num_gpu", "-1")), `p.csv:3: num_gpu: negative value -1`},
		"negative CPU":         {openbCSV(ok.set("cpu_milli", "-4")), `p.csv:2: cpu_milli: negative value -4`},
		"fraction above 1000":  {openbCSV(ok.set("gpu_milli", "1500")), `p.csv:2: gpu_milli: 1500 is above one GPU (1000)`},
		"fraction of 2 GPUs":   {openbCSV(ok.set("num_gpu", "2", "gpu_milli", "500")), `p.csv:2: gpu_milli: 500 with num_gpu 2: a fraction applies to one GPU only`},
		"fraction of no GPU":   {openbCSV(ok.set("num_gpu", "0", "gpu_milli", "500")), `p.csv:2: gpu_milli: 500 on a pod with num_gpu 0`},
		"malformed number":     {openbCSV(ok.set("memory_mib", "16Gi")), `p.csv:2: memory_mib: malformed integer "16Gi"`},
		"malformed time":       {openbCSV(ok.set("creation_time", "soon")), `p.csv:2: creation_time: malformed number "soon"`},
		"negative time":        {openbCSV(ok.set("deletion_time", "-1")), `p.csv:2: deletion_time: negative time -1`},
		"no creation time":     {openbCSV(ok.set("creation_time", "")), `p.csv:2: creation_time: empty: every pod needs its arrival time`},
		"duplicate pod":        {openbCSV(ok, ok), `p.csv:3: name: pod "p0" already appears on line 2`},
		"bad quote":            {openbCSV(ok) + "\"p1,1\n", `p.csv:3: extraneous or missing " in quoted-field`},
		"too many GPUs on pod": {openbCSV(ok.set("num_gpu", "5000")), `p.csv:2: num_gpu: 5000 is above the limit of 1024`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ReadOpenbCSV(strings.NewReader(tc.doc), "p.csv")
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
}
