package trace

import (
	"bytes"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/cluster"
)

// The fuzzers check what every reader promises: no panic on any input, and
// anything accepted is usable as is. Seeds are the valid examples plus the
// shapes of the error tables; crashers found are kept in testdata/fuzz.

func addFile(f *testing.F, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
}

// checkJobs is the property of an accepted trace.
func checkJobs(t *testing.T, tr *Trace) {
	for _, j := range tr.Jobs {
		if err := j.Validate(); err != nil {
			t.Fatalf("accepted a job that fails Validate: %v", err)
		}
		if j.Runtime < 0 || j.Submit.Before(Epoch) {
			t.Fatalf("job %s: runtime %v submit %v", j.ID, j.Runtime, j.Submit)
		}
	}
}

func FuzzReadOpenbCSV(f *testing.F) {
	ok := openbPod()
	for _, doc := range []string{
		openbCSV(ok),
		openbCSV(ok.set("gpu_milli", "250", "gpu_spec", "T4|P100"), ok.set("name", "p1", "num_gpu", "8")),
		openbCSV(ok.set("scheduled_time", "", "deletion_time", "")),
		openbCSV(ok.set("num_gpu", "2", "gpu_milli", "500")),
		"name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,1000\n",
		"name,cpu_milli,memory_mib,num_gpu,gpu_milli\n\"p\n1\",1,1,1,1\n",
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := ReadOpenbCSV(bytes.NewReader(in), "fuzz.csv")
		if err != nil {
			return
		}
		checkJobs(t, tr)
		for _, j := range tr.Jobs {
			if len(j.PodSets) != 1 || j.PodSets[0].Count != 1 {
				t.Fatalf("job %s is not one pod", j.ID)
			}
		}
	})
}

func FuzzReadJobTraceCSV(f *testing.F) {
	addFile(f, "../../examples/sim/jobs.csv")
	ok := jobCSVRow()
	for _, doc := range []string{
		jobCSV(ok),
		jobCSV(ok.set("gpu_milli", "500", "submit", "1.5", "models", "A|B"), ok.set("pod_set", "w", "count", "4")),
		jobCSV(ok, ok.set("job", "j2"), ok.set("pod_set", "b")),
		jobCSV(ok.set("queue", "a,b", "job", `"x"`)),
		jobCSV(ok.set("count", "0")),
		"job,submit\nj,0\n",
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := ReadJobTraceCSV(bytes.NewReader(in), "fuzz.csv")
		if err != nil {
			return
		}
		checkJobs(t, tr)
		// What was accepted can be written and read back unchanged.
		var buf bytes.Buffer
		if err := WriteJobTraceCSV(&buf, tr.Jobs); err != nil {
			t.Fatal(err)
		}
		back, err := ReadJobTraceCSV(&buf, "back.csv")
		if err != nil {
			t.Fatalf("written trace does not read back: %v\n%s", err, buf.String())
		}
		if diff := cmp.Diff(tr.Jobs, back.Jobs, ignorePlace); diff != "" {
			t.Fatalf("round trip (-read +reread):\n%s", diff)
		}
	})
}

func FuzzReadJobTraceYAML(f *testing.F) {
	addFile(f, "../../examples/sim/jobs.yaml")
	for _, doc := range []string{
		jobsYAML,
		editYAML(jobsYAML, 8, "        gpus: 1\n        gpu_milli: 2000"),
		editYAML(jobsYAML, 7, "        count: 0"),
		"jobs:\n  - id: j1\n    submit: 0\n    pod_sets: []\n",
		"jobs: &a [*a]\n",
		"jobs:\n  - &j {id: a, submit: 1, pod_sets: [{gpus: 1}]}\n  - *j\n",
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := ReadJobTraceYAML(bytes.NewReader(in), "fuzz.yaml")
		if err != nil {
			return
		}
		checkJobs(t, tr)
	})
}

// fuzzLimits keep accepted clusters small enough to build many per second.
var fuzzLimits = limits{nodes: 512, gpusPerNode: 64, gpus: 4096}

func FuzzReadClusterYAML(f *testing.F) {
	addFile(f, "../../examples/sim/cluster.yaml")
	for _, doc := range []string{
		clusterYAML,
		editYAML(clusterYAML, 14, "      layout: nvl72"),
		editYAML(clusterYAML, 5, `  - name: "n{i/2}"`),
		"groups:\n  - name: n\n    gpus: {model: A, layout: explicit, devices: [{id: a}, {id: a}]}\n",
		"levels: [{name: a, label: a}, {name: b, label: b}]\ngroups:\n  - {name: \"n{i}\", count: 2, labels: {a: \"x{i}\", b: y}}\n",
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := readClusterYAML(bytes.NewReader(in), "fuzz.yaml", fuzzLimits)
		if err != nil {
			return
		}
		if _, err := cluster.New(c.Topology, c.Nodes); err != nil {
			t.Fatalf("accepted a cluster that does not build: %v", err)
		}
		if len(c.Nodes) == 0 || len(c.Nodes) > fuzzLimits.nodes || c.GPUs() > fuzzLimits.gpus {
			t.Fatalf("%d nodes, %d GPUs", len(c.Nodes), c.GPUs())
		}
	})
}

func FuzzReadPhilly(f *testing.F) {
	addFile(f, "../../examples/sim/jobs.philly.json")
	for _, doc := range []string{
		`[{"jobid": "j", "vc": "a", "submitted_time": "2017-10-07 01:00:00", "attempts": [{"start_time": "2017-10-07 01:00:10", "end_time": null, "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]}]}]`,
		`[{"jobid": "j", "submitted_time": "2017-10-07 01:00:00", "attempts": [{"start_time": "None", "detail": []}]}]`,
		`[{"jobid": "j", "submitted_time": "2017-10-07 01:00:00", "attempts": [{"start_time": "2017-10-07 02:00:00", "end_time": "2017-10-07 01:00:00"}]}]`,
		`[]`,
		`[{"jobid": 1}]`,
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := ReadPhilly(bytes.NewReader(in), "fuzz.json")
		if err != nil {
			return
		}
		checkJobs(t, tr)
		for _, j := range tr.Jobs {
			for _, ps := range j.PodSets {
				if ps.Request.GPUs < 1 {
					t.Fatalf("job %s pod set %s asks for no GPU", j.ID, ps.Name)
				}
			}
		}
	})
}
