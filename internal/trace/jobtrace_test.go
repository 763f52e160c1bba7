package trace

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/corral-dev/corral/internal/workload"
)

// exampleJobs is what examples/sim/jobs.csv and jobs.yaml (the examples of
// docs/formats.md) both hold.
func exampleJobs() []Job {
	at := func(s int) time.Time { return Epoch.Add(time.Duration(s) * time.Second) }
	return []Job{
		{Runtime: time.Hour, Job: &workload.Job{
			ID: "notebook", Queue: "team-a", Submit: at(0), ExpectedRuntime: 2 * time.Hour, Preemptible: true,
			PodSets: []workload.PodSet{{Name: "main", Count: 1, Request: workload.Request{CPUMilli: 4000, MemMiB: 16384, GPUs: 1, GPUMilli: 250}}},
		}},
		{Runtime: 90 * time.Minute, Job: &workload.Job{
			ID: "finetune", Queue: "team-b", Submit: at(30), ExpectedRuntime: 2 * time.Hour,
			PodSets: []workload.PodSet{{Name: "main", Count: 1, Request: workload.Request{CPUMilli: 32000, MemMiB: 262144, GPUs: 4, Models: []string{"H100", "A100"}}}},
		}},
		{Runtime: 24 * time.Hour, Job: &workload.Job{
			ID: "pretrain", Queue: "team-a", Priority: 100, Submit: at(60), MinMembers: 17,
			Topology:        workload.Topology{Required: "rack"},
			ExpectedRuntime: 26 * time.Hour, CheckpointInterval: 30 * time.Minute,
			PodSets: []workload.PodSet{
				{Name: "launcher", Count: 1, Request: workload.Request{CPUMilli: 8000, MemMiB: 32768}},
				{Name: "workers", Count: 16, Request: workload.Request{CPUMilli: 192000, MemMiB: 1966080, GPUs: 8, Models: []string{"H100"}}},
			},
		}},
	}
}

// ignorePlace compares jobs without where they were read from.
var ignorePlace = cmp.Options{
	cmpopts.IgnoreFields(Job{}, "Line"),
	cmpopts.IgnoreFields(workload.Job{}, "Source"),
}

func TestJobTraceExamples(t *testing.T) {
	cases := map[string]struct {
		path  string
		name  string
		lines []int
	}{
		"csv":  {"../../examples/sim/jobs.csv", "jobs.csv", []int{2, 3, 4}},
		"yaml": {"../../examples/sim/jobs.yaml", "example", []int{3, 15, 25}},
	}
	for kind, tc := range cases {
		t.Run(kind, func(t *testing.T) {
			tr, err := LoadTrace(tc.path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(exampleJobs(), tr.Jobs, ignorePlace); diff != "" {
				t.Errorf("jobs (-want +got):\n%s", diff)
			}
			var lines []int
			for _, j := range tr.Jobs {
				lines = append(lines, j.Line)
				if want := tr.Jobs[0].Source[:strings.LastIndexByte(tr.Jobs[0].Source, ':')]; !strings.HasPrefix(j.Source, want) {
					t.Errorf("source %q", j.Source)
				}
			}
			if diff := cmp.Diff(tc.lines, lines); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
			if tr.Name != tc.name {
				t.Errorf("name %q, want %q", tr.Name, tc.name)
			}
		})
	}
}

func TestWriteJobTraceCSVRoundTrip(t *testing.T) {
	c, err := LoadCluster("dgx-h100:blocks=2,racks=2,nodes=4")
	if err != nil {
		t.Fatal(err)
	}
	gen, err := LoadTrace("gen:llm?jobs=200", Options{Seed: 3, Cluster: c})
	if err != nil {
		t.Fatal(err)
	}
	mc, err := LoadCluster("mig:nodes=2")
	if err != nil {
		t.Fatal(err)
	}
	migGen, err := LoadTrace("gen:mig?jobs=100", Options{Seed: 3, Cluster: mc})
	if err != nil {
		t.Fatal(err)
	}
	mem := exampleJobs()
	mem[0].PodSets[0].Request.GPUMilli, mem[0].PodSets[0].Request.GPUMemMiB = 0, 8192
	for name, jobs := range map[string][]Job{"example": exampleJobs(), "generated": gen.Jobs, "mig": migGen.Jobs, "memory": mem} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteJobTraceCSV(&buf, jobs); err != nil {
				t.Fatal(err)
			}
			back, err := ReadJobTraceCSV(&buf, "out.csv")
			if err != nil {
				t.Fatal(err)
			}
			// A trace file holds what the scheduler is told (the declared
			// checkpoint interval), not how the job really checkpoints.
			jobs := slices.Clone(jobs)
			for i := range jobs {
				jobs[i].CheckpointEvery, jobs[i].CheckpointJitter = 0, 0
			}
			// The reader names the default queue; the writer wrote it out.
			if diff := cmp.Diff(jobs, back.Jobs, ignorePlace); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

// jobRow is one corral CSV row by column.
type jobRow map[string]string

func jobCSVRow() jobRow {
	return jobRow{"job": "j1", "submit": "0", "count": "1", "gpus": "1"}
}

func (r jobRow) set(kv ...string) jobRow {
	out := jobRow{}
	for k, v := range r {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// jobCSV renders rows under the full corral header.
func jobCSV(rows ...jobRow) string {
	var b strings.Builder
	b.WriteString(strings.Join(csvColumns, ",") + "\n")
	for _, r := range rows {
		var vals []string
		for _, c := range csvColumns {
			vals = append(vals, r[c])
		}
		b.WriteString(strings.Join(vals, ",") + "\n")
	}
	return b.String()
}

func TestReadJobTraceCSVErrors(t *testing.T) {
	ok := jobCSVRow()
	cases := map[string]struct{ doc, want string }{
		"missing column":      {"job,count\nj1,1\n", `t.csv:1: missing column "submit"`},
		"unknown column":      {"job,submit,gpu\n", `t.csv:1: unknown column "gpu" (known: job,submit,queue,user,priority,min_members,required_level,preferred_level,runtime,expected_runtime,checkpoint_interval,preemptible,pod_set,count,cpu_milli,memory_mib,gpus,gpu_milli,models,gpu_memory_mib,mig_profile)`},
		"negative GPUs":       {jobCSV(ok.set("gpus", "-1")), `t.csv:2: gpus: negative value -1`},
		"fraction above 1000": {jobCSV(ok.set("gpu_milli", "1001")), `t.csv:2: gpu_milli: 1001 is above one GPU (1000)`},
		"fraction of 2 GPUs":  {jobCSV(ok.set("gpus", "2", "gpu_milli", "500")), `t.csv:2: gpu_milli: 500 with gpus 2: a fraction applies to exactly one GPU`},
		"fraction of no GPU":  {jobCSV(ok.set("gpus", "", "gpu_milli", "500")), `t.csv:2: gpu_milli: 500 on a pod with 0 gpus: set gpus to 1 for a fraction`},
		"malformed number":    {jobCSV(ok.set("cpu_milli", "4 cores")), `t.csv:2: cpu_milli: malformed integer "4 cores"`},
		"malformed submit":    {jobCSV(ok.set("submit", "1e")), `t.csv:2: submit: malformed number "1e"`},
		"malformed bool":      {jobCSV(ok.set("preemptible", "maybe")), `t.csv:2: preemptible: malformed boolean "maybe" (want true or false)`},
		"malformed priority":  {jobCSV(ok.set("priority", "high")), `t.csv:2: priority: malformed integer "high" (want -2147483648..2147483647)`},
		"zero pods":           {jobCSV(ok.set("count", "0")), `t.csv:2: count: 0 pods: a pod set needs at least one`},
		"no submit":           {jobCSV(ok.set("submit", "")), `t.csv:2: submit: empty: every job needs its arrival time`},
		"infinite runtime":    {jobCSV(ok.set("runtime", "Inf")), `t.csv:2: runtime: not a finite number of seconds`},
		"runtime too long":    {jobCSV(ok.set("runtime", "1e12")), `t.csv:2: runtime: time 1e+12s is above the limit of 1000000000s`},
		"empty job id":        {jobCSV(ok.set("job", "")), `t.csv:2: job: empty job id`},
		"empty model":         {jobCSV(ok.set("models", "A100||H100")), `t.csv:2: models: empty model name in "A100||H100"`},
		"min above pods":      {jobCSV(ok.set("min_members", "3")), `t.csv:2: min_members: 3 is above the job's 1 pods`},
		"job columns differ":  {jobCSV(ok, ok.set("pod_set", "b", "queue", "q")), `t.csv:3: queue: "q" differs from "" on the job's first line 2`},
		"rows not together":   {jobCSV(ok, ok.set("job", "j2"), ok.set("pod_set", "b")), `t.csv:4: job: job "j1" already started on line 2: rows of one job must be consecutive`},
		"same pod set twice":  {jobCSV(ok, ok), `t.csv:3: pod_set: job "j1" has two pod sets named "main"`},
		"wrong field count":   {jobCSV(ok) + "j2,0\n", `t.csv:3: 2 fields where the header has 21`},
		"empty file":          {"", `t.csv: empty file: want a header row`},
		"memory and milli":    {jobCSV(ok.set("gpu_milli", "500", "gpu_memory_mib", "4096")), `t.csv:2: gpu_memory_mib: 4096 MiB with gpu_milli 500: ask a share by memory or by milli, not both`},
		"memory of 2 GPUs":    {jobCSV(ok.set("gpus", "2", "gpu_memory_mib", "4096")), `t.csv:2: gpu_memory_mib: a share of one GPU needs gpus 1, not 2`},
		"no MIG profile":      {jobCSV(ok.set("mig_profile", "big")), `t.csv:2: mig_profile: "big" is not a MIG profile name (like 1g.10gb)`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ReadJobTraceCSV(strings.NewReader(tc.doc), "t.csv")
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
}

// jobYAML is a valid one-job trace; editYAML replaces its lines.
const jobsYAML = `jobs:
  - id: j1
    submit: 10
    runtime: 60
    pod_sets:
      - name: workers
        count: 2
        gpus: 1
`

func TestReadJobTraceYAMLErrors(t *testing.T) {
	cases := map[string]struct{ doc, want string }{
		"misspelt field":      {editYAML(jobsYAML, 8, "        gpu: 1"), `t.yaml:8: unknown field "gpu"`},
		"negative GPUs":       {editYAML(jobsYAML, 8, "        gpus: -1"), `t.yaml:8: gpus: negative value -1`},
		"fraction above 1000": {editYAML(jobsYAML, 8, "        gpus: 1\n        gpu_milli: 2000"), `t.yaml:9: gpu_milli: 2000 is above one GPU (1000)`},
		"fraction of 2 GPUs":  {editYAML(jobsYAML, 8, "        gpus: 2\n        gpu_milli: 10"), `t.yaml:9: gpu_milli: 10 with gpus 2: a fraction applies to exactly one GPU`},
		"zero pods":           {editYAML(jobsYAML, 7, "        count: 0"), `t.yaml:7: count: 0 pods: a pod set needs at least one`},
		"no pod sets":         {"jobs:\n  - id: j1\n    submit: 0\n    pod_sets: []\n", `t.yaml:4: pod_sets: job "j1" has no pod sets`},
		"malformed number":    {editYAML(jobsYAML, 3, "    submit: soon"), `t.yaml:3: "soon" is not a number`},
		"negative time":       {editYAML(jobsYAML, 4, "    runtime: -60"), `t.yaml:4: runtime: negative time -60`},
		"no id":               {editYAML(jobsYAML, 2, "  - queue: q"), `t.yaml:2: id: missing job id`},
		"no submit":           {editYAML(jobsYAML, 3, ""), `t.yaml:2: submit: missing: every job needs its arrival time`},
		"min above pods":      {editYAML(jobsYAML, 4, "    min_members: 3"), `t.yaml:4: min_members: 3 is above the job's 2 pods`},
		"negative min":        {editYAML(jobsYAML, 4, "    min_members: -1"), `t.yaml:4: min_members: negative value -1`},
		"empty model":         {editYAML(jobsYAML, 8, `        models: [""]`), `t.yaml:8: models: empty model name`},
		"models not a list":   {editYAML(jobsYAML, 8, `        models: H100`), "t.yaml:8: \"H100\" is not a list"},
		"duplicate job":       {jobsYAML + strings.SplitN(jobsYAML, "\n", 2)[1], `t.yaml:9: id: job "j1" is already defined on line 2`},
		"duplicate key":       {editYAML(jobsYAML, 4, "    submit: 5"), `t.yaml:4: mapping key "submit" already defined at line 3`},
		"empty":               {"\n", `t.yaml: empty file`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ReadJobTraceYAML(strings.NewReader(tc.doc), "t.yaml")
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
}

func TestLoadTraceFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	openb := write("pods.csv", openbCSV(openbPod()))
	corral := write("jobs.csv", jobCSV(jobCSVRow()))
	other := write("other.csv", "id,x\n")
	txt := write("jobs.txt", "")
	cases := map[string]struct {
		spec    string
		wantErr string
		wantID  workload.JobID
	}{
		"openb csv by header":  {spec: openb, wantID: "p0"},
		"corral csv by header": {spec: corral, wantID: "j1"},
		"unknown csv header":   {spec: other, wantErr: other + `:1: unknown CSV trace: the header must start with "job," (corral job trace) or "name," (openb pod list)`},
		"unknown extension":    {spec: txt, wantErr: txt + `: unknown trace file type ".txt": want .csv, .yaml or .yml, sacct --parsable2 output (a header starting "JobID|"), or philly:PATH for a Philly job log`},
		"unknown openb":        {spec: "openb:nosuch", wantErr: `unknown trace "openb:nosuch" (built-in: openb:default, openb:gpushare40, openb:multigpu20, openb:gpuspec10, openb:cpu050, gen:llm, gen:mig)`},
		"no such name":         {spec: "philly", wantErr: `trace "philly" is neither a file nor a built-in trace (openb:default, openb:gpushare40, openb:multigpu20, openb:gpuspec10, openb:cpu050, gen:llm, gen:mig)`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tr, err := LoadTrace(tc.spec, Options{})
			switch {
			case tc.wantErr != "":
				if err == nil || err.Error() != tc.wantErr {
					t.Errorf("error\n got: %v\nwant: %s", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case tr.Jobs[0].ID != tc.wantID || tr.Name != filepath.Base(tc.spec):
				t.Errorf("got %s named %s", tr.Jobs[0].ID, tr.Name)
			}
		})
	}
}
