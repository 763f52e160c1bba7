package trace

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/workload"
)

// TestPhillyExample reads examples/sim/jobs.philly.json: the last attempt
// that started gives the pods and the runtime, a job with no attempt and a
// logging gap (an attempt with no times) are handled, machines with unequal
// GPU counts become two pod sets of one gang, the virtual cluster is the queue.
func TestPhillyExample(t *testing.T) {
	tr, err := LoadTrace("philly:../../examples/sim/jobs.philly.json", Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) time.Time { return Epoch.Add(d) }
	gpus := func(name string, count, n int) workload.PodSet {
		return workload.PodSet{Name: name, Count: count, Request: workload.Request{GPUs: n}}
	}
	want := []Job{
		// Retried once: the second attempt, on two 8-GPU machines, is replayed.
		{Runtime: 12 * time.Hour, Job: &workload.Job{ID: "application_1_0001", Queue: "vc-a", User: "u1", Submit: at(0),
			PodSets: []workload.PodSet{gpus("gpus-8", 2, 8)}}},
		{Runtime: 30 * time.Minute, Job: &workload.Job{ID: "application_1_0002", Queue: "vc-b", User: "u2", Submit: at(9 * time.Minute),
			PodSets: []workload.PodSet{gpus("gpus-1", 1, 1)}}},
		// application_1_0003 never ran. 0004's last attempt is a logging
		// gap: the one before it is the run.
		{Runtime: 2 * time.Hour, Job: &workload.Job{ID: "application_1_0004", Queue: "vc-a", User: "u3", Submit: at(30 * time.Minute),
			PodSets: []workload.PodSet{gpus("gpus-8", 1, 8), gpus("gpus-4", 1, 4)}}},
		// Running when the log was cut: runs to the end.
		{Runtime: 0, Job: &workload.Job{ID: "application_1_0005", Queue: "vc-c", User: "u4", Submit: at(119 * time.Minute),
			PodSets: []workload.PodSet{gpus("gpus-2", 1, 2)}}},
	}
	if diff := cmp.Diff(want, tr.Jobs, ignorePlace); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	if tr.Name != "philly:jobs.philly.json" {
		t.Errorf("name %q", tr.Name)
	}
	// Errors and sources point at the job's object.
	if got := tr.Jobs[1].Source; got != "../../examples/sim/jobs.philly.json:24" {
		t.Errorf("source %q, want the line of the job's opening brace", got)
	}
}

func TestPhillyErrors(t *testing.T) {
	job := func(fields string) string {
		return `{"jobid": "j1", "vc": "a", "submitted_time": "2017-10-07 01:00:00", ` + fields + `}`
	}
	ran := `"attempts": [{"start_time": "2017-10-07 01:00:10", "end_time": "2017-10-07 02:00:00", "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}]`
	cases := map[string]struct{ in, want string }{
		"not an array":    {`{"jobid": "j1"}`, "t.json:1: want a JSON array of jobs"},
		"empty":           {``, "want a JSON array of jobs"},
		"not closed":      {"[\n" + job(ran), "t.json:2: unexpected end of file"},
		"trailing data":   {"[" + job(ran) + "] x", "data after the array of jobs"},
		"wrong type":      {"[\n\n" + `{"jobid": 7}` + "]", "t.json:3: cannot unmarshal number"},
		"no id":           {"[" + `{"submitted_time": "2017-10-07 01:00:00"}` + "]", "jobid: empty job id"},
		"duplicate":       {"[\n" + job(ran) + ",\n" + job(ran) + "\n]", "t.json:3: jobid: job j1 already appears on line 2"},
		"bad submit":      {"[" + `{"jobid": "j1", "submitted_time": "yesterday"}` + "]", `submitted_time: "yesterday": want a time`},
		"no submit":       {"[" + `{"jobid": "j1"}` + "]", "submitted_time: null: want a time"},
		"bad start":       {"[" + job(`"attempts": [{"start_time": "soon"}]`) + "]", `attempts[0].start_time: "soon"`},
		"end before":      {"[" + job(`"attempts": [{"start_time": "2017-10-07 02:00:00", "end_time": "2017-10-07 01:00:00", "detail": [{"gpus": ["gpu0"]}]}]`) + "]", "end_time: 2017-10-07 01:00:00 is before start_time"},
		"machine twice":   {"[" + job(`"attempts": [{"start_time": "2017-10-07 02:00:00", "detail": [{"ip": "m1", "gpus": ["gpu0"]}, {"ip": "m1", "gpus": ["gpu1"]}]}]`) + "]", "detail[1].ip: machine m1 appears twice"},
		"nothing started": {"[" + job(`"attempts": []`) + "]", "no job that started on a GPU"},
		"no gpus":         {"[" + job(`"attempts": [{"start_time": "2017-10-07 02:00:00", "detail": [{"ip": "m1", "gpus": []}]}]`) + "]", "no job that started on a GPU"},
		"submits 40 years apart": {"[\n" + job(ran) + ",\n" + `{"jobid": "j2", "vc": "a", "submitted_time": "2057-10-07 01:00:00", ` +
			`"attempts": [{"start_time": "2057-10-07 01:00:10", "end_time": "2057-10-07 02:00:00", "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}]}` + "\n]",
			"t.json:3: submitted_time: 1262304000s after the first submit is above the limit of 1000000000s"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ReadPhilly(strings.NewReader(tc.in), "t.json")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestPhillyNeedsAPath(t *testing.T) {
	_, err := LoadTrace("philly:", Options{})
	if err == nil || !strings.Contains(err.Error(), "philly: needs the job log's path") {
		t.Errorf("error %v", err)
	}
}
