package trace

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/internal/workload"
)

// TestSacctExample reads examples/sim/jobs.sacct: steps and the allocation
// that never started are left out, resources are split per node, times
// count from the first submit, the User column names the job's user.
func TestSacctExample(t *testing.T) {
	tr, err := LoadTrace("../../examples/sim/jobs.sacct", Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) time.Time { return Epoch.Add(d) }
	pod := func(n, cpus, gpus int, memMiB int64) []workload.PodSet {
		return []workload.PodSet{{Name: "main", Count: n, Request: workload.Request{CPUMilli: int64(cpus) * 1000, MemMiB: memMiB, GPUs: gpus}}}
	}
	want := []Job{
		{Runtime: 12 * time.Hour, Job: &workload.Job{ID: "1001", Queue: "team-a", User: "alice", Submit: at(0), ExpectedRuntime: 24 * time.Hour,
			PodSets: pod(4, 64, 8, 512000)}},
		{Runtime: 90 * time.Minute, Job: &workload.Job{ID: "1002", Queue: "team-b", User: "bob", Submit: at(10 * time.Minute), ExpectedRuntime: 2 * time.Hour,
			PodSets: pod(1, 32, 4, 262144)}},
		{Runtime: 4 * time.Hour, Job: &workload.Job{ID: "1004", Queue: "team-a", User: "alice", Submit: at(20 * time.Minute), ExpectedRuntime: 4 * time.Hour,
			PodSets: pod(1, 8, 1, 65536)}},
		// Still running when sacct ran: no end, so it runs to the end.
		{Runtime: 0, Job: &workload.Job{ID: "1005", Queue: "team-b", User: "carol", Submit: at(time.Hour), ExpectedRuntime: 48 * time.Hour,
			PodSets: pod(2, 32, 8, 262144)}},
	}
	if diff := cmp.Diff(want, tr.Jobs, ignorePlace); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	if got := tr.Jobs[0].Source; got != "../../examples/sim/jobs.sacct:2" {
		t.Errorf("source %q", got)
	}
}

func TestSacctErrors(t *testing.T) {
	const head = "JobID|Submit|Start|End|NNodes|AllocTRES|Timelimit\n"
	const ok = "|2026-01-01T00:00:00|2026-01-01T00:00:01|2026-01-01T01:00:00|"
	cases := map[string]struct{ in, want string }{
		"missing column":  {"JobID|Submit|Start|End|NNodes\n", "AllocTRES: missing column"},
		"field count":     {head + "1|x\n", "t.sacct:2: 2 fields, the header has 7"},
		"bad submit":      {head + "1|yesterday|Unknown|Unknown|1|cpu=1|\n", "t.sacct:2: Submit: \"yesterday\""},
		"end before":      {head + "1|2026-01-01T00:00:00|2026-01-01T02:00:00|2026-01-01T01:00:00|1|cpu=1|\n", "End: 2026-01-01T01:00:00 is before Start"},
		"uneven gpus":     {head + "1" + ok + "2|gres/gpu=3|\n", "AllocTRES: 3 GPUs over 2 nodes"},
		"bad nodes":       {head + "1" + ok + "0|cpu=1|\n", "NNodes: \"0\""},
		"bad mem":         {head + "1" + ok + "1|mem=lots|\n", "mem=lots"},
		"bad limit":       {head + "1" + ok + "1|cpu=1|1-xx\n", "Timelimit: \"1-xx\""},
		"duplicate":       {head + "1" + ok + "1|cpu=1|\n1" + ok + "1|cpu=1|\n", "t.sacct:3: JobID: job 1 already appears on line 2"},
		"nothing started": {head + "1|2026-01-01T00:00:00|Unknown|Unknown|1|cpu=1|\n", "no allocation that started"},
		"empty":           {"", "empty file"},
		"submits 40 years apart": {head + "1" + ok + "1|cpu=1|\n2|2066-01-01T00:00:00|2066-01-01T00:00:01|2066-01-01T01:00:00|1|cpu=1|\n",
			"t.sacct:3: Submit: 1262304000s after the first submit is above the limit of 1000000000s"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ReadSacct(strings.NewReader(tc.in), "t.sacct")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestSacctDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"UNLIMITED": 0, "30": 30 * time.Minute, "05:30": 5*time.Minute + 30*time.Second,
		"02:00:00": 2 * time.Hour, "1-00:00:00": 24 * time.Hour, "2-03": 51 * time.Hour, "1-01:30": 25*time.Hour + 30*time.Minute,
	} {
		got, err := sacctDuration(in)
		if err != nil || got != want {
			t.Errorf("sacctDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}
