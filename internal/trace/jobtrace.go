package trace

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/workload"
)

// The corral CSV job trace: one row per pod set. The job columns are shared by
// every row of a job; a continuation row leaves them empty or repeats the
// first row's text exactly.
var (
	jobColumns = []string{
		"submit", "queue", "user", "priority", "min_members", "required_level", "preferred_level",
		"runtime", "expected_runtime", "checkpoint_interval", "preemptible",
	}
	podSetColumns = []string{"pod_set", "count", "cpu_milli", "memory_mib", "gpus", "gpu_milli", "models",
		"gpu_memory_mib", "mig_profile"}
	// csvColumns is the order WriteJobTraceCSV writes.
	csvColumns = append(append([]string{"job"}, jobColumns...), podSetColumns...)
)

// ReadJobTraceCSV reads a corral CSV job trace. name is the file name used in
// messages and in each job's Source.
func ReadJobTraceCSV(r io.Reader, name string) (*Trace, error) {
	f, err := openCSV(r, name, []string{"job", "submit"}, csvColumns[2:])
	if err != nil {
		return nil, err
	}
	t := &Trace{Name: name}
	seen := map[workload.JobID]int{} // job id -> line of its first row
	var cur *Job
	var first []string // the current job's first-row job columns
	for {
		ok, err := f.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		id := workload.JobID(f.str("job"))
		if id == "" {
			return nil, f.errAt("job", "empty job id")
		}
		if cur == nil || id != cur.ID {
			if cur != nil {
				if err := checkJob(cur.Job, name, cur.Line); err != nil {
					return nil, err
				}
			}
			if prev, dup := seen[id]; dup {
				return nil, f.errAt("job", "job %q already started on line %d: rows of one job must be consecutive", id, prev)
			}
			seen[id] = f.line()
			j, err := csvJobHead(f)
			if err != nil {
				return nil, err
			}
			t.Jobs = append(t.Jobs, j)
			cur = &t.Jobs[len(t.Jobs)-1]
			first = first[:0]
			for _, c := range jobColumns {
				first = append(first, f.str(c))
			}
		} else {
			for i, c := range jobColumns {
				if v := f.str(c); v != "" && v != first[i] {
					return nil, f.errAt(c, "%q differs from %q on the job's first line %d", v, first[i], cur.Line)
				}
			}
		}
		ps, err := csvPodSet(f)
		if err != nil {
			return nil, err
		}
		for _, other := range cur.PodSets {
			if other.Name == ps.Name {
				return nil, f.errAt("pod_set", "job %q has two pod sets named %q", cur.ID, ps.Name)
			}
		}
		if len(cur.PodSets) == defaultLimits.podSetsPerJob {
			return nil, f.errAt("pod_set", "job %q has more than %d pod sets", cur.ID, defaultLimits.podSetsPerJob)
		}
		cur.PodSets = append(cur.PodSets, ps)
	}
	if cur != nil {
		if err := checkJob(cur.Job, name, cur.Line); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// csvJobHead reads the job columns of a job's first row.
func csvJobHead(f *csvFile) (Job, error) {
	line := f.line()
	j := &workload.Job{
		ID:     workload.JobID(f.str("job")),
		Queue:  f.str("queue"),
		User:   f.str("user"),
		Source: fmt.Sprintf("%s:%d", f.name, line),
	}
	if j.Queue == "" {
		j.Queue = "default"
	}
	submit, ok, err := f.seconds("submit")
	if err != nil {
		return Job{}, err
	}
	if !ok {
		return Job{}, f.errAt("submit", "empty: every job needs its arrival time")
	}
	j.Submit = Epoch.Add(submit)
	if s := f.str("priority"); s != "" {
		p, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return Job{}, f.errAt("priority", "malformed integer %q (want -2147483648..2147483647)", s)
		}
		j.Priority = int32(p)
	}
	if j.MinMembers, err = f.intMax("min_members", 0, int64(defaultLimits.podsPerSet)*int64(defaultLimits.podSetsPerJob)); err != nil {
		return Job{}, err
	}
	j.Topology.Required = f.str("required_level")
	j.Topology.Preferred = f.str("preferred_level")
	runtime, _, err := f.seconds("runtime")
	if err != nil {
		return Job{}, err
	}
	if j.ExpectedRuntime, _, err = f.seconds("expected_runtime"); err != nil {
		return Job{}, err
	}
	if j.CheckpointInterval, _, err = f.seconds("checkpoint_interval"); err != nil {
		return Job{}, err
	}
	if s := f.str("preemptible"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return Job{}, f.errAt("preemptible", "malformed boolean %q (want true or false)", s)
		}
		j.Preemptible = b
	}
	return Job{Job: j, Runtime: runtime, Line: line}, nil
}

// csvPodSet reads the pod-set columns of the current row.
func csvPodSet(f *csvFile) (workload.PodSet, error) {
	ps := workload.PodSet{Name: f.str("pod_set")}
	if ps.Name == "" {
		ps.Name = "main"
	}
	var err error
	if ps.Count, err = f.intMax("count", 1, int64(defaultLimits.podsPerSet)); err != nil {
		return ps, err
	}
	if ps.Count == 0 {
		return ps, f.errAt("count", "0 pods: a pod set needs at least one")
	}
	r := &ps.Request
	if r.CPUMilli, err = f.int64("cpu_milli", 0); err != nil {
		return ps, err
	}
	if r.MemMiB, err = f.int64("memory_mib", 0); err != nil {
		return ps, err
	}
	if r.GPUs, err = f.intMax("gpus", 0, int64(defaultLimits.gpusPerPod)); err != nil {
		return ps, err
	}
	milli, err := f.intMax("gpu_milli", 0, 1<<31)
	if err != nil {
		return ps, err
	}
	if r.GPUMilli, err = gpuFraction(r.GPUs, milli); err != nil {
		return ps, f.errAt("gpu_milli", "%v", err)
	}
	if s := f.str("models"); s != "" {
		if r.Models, err = splitModels(s); err != nil {
			return ps, f.errAt("models", "%v", err)
		}
	}
	if r.GPUMemMiB, err = f.int64("gpu_memory_mib", 0); err != nil {
		return ps, err
	}
	r.MIGProfile = f.str("mig_profile")
	if err := deviceShare(r); err != nil {
		return ps, f.errAt(deviceField(r), "%v", err)
	}
	return ps, nil
}

// deviceShare checks a pod set's memory share or MIG instance against its
// other GPU columns.
func deviceShare(r *workload.Request) error {
	switch {
	case r.GPUMemMiB > 0 && r.GPUMilli > 0:
		return fmt.Errorf("%d MiB with gpu_milli %d: ask a share by memory or by milli, not both", r.GPUMemMiB, r.GPUMilli)
	case (r.GPUMemMiB > 0 || r.MIGProfile != "") && r.GPUs != 1:
		return fmt.Errorf("a share of one GPU needs gpus 1, not %d", r.GPUs)
	case r.MIGProfile != "" && (r.GPUMemMiB > 0 || r.GPUMilli > 0):
		return fmt.Errorf("MIG profile %s with a GPU share: ask one", r.MIGProfile)
	case r.MIGProfile != "" && workload.MIGCompute(r.MIGProfile) == 0:
		return fmt.Errorf("%q is not a MIG profile name (like 1g.10gb)", r.MIGProfile)
	}
	return nil
}

func deviceField(r *workload.Request) string {
	if r.MIGProfile != "" {
		return "mig_profile"
	}
	return "gpu_memory_mib"
}

// gpuFraction checks gpu_milli against gpus and returns the Request.GPUMilli to
// store: the fraction when it is one (1..999 of one GPU), else 0, since 1000
// or an empty value means whole GPUs.
func gpuFraction(gpus, milli int) (int, error) {
	switch {
	case milli > workload.MilliPerGPU:
		return 0, fmt.Errorf("%d is above one GPU (1000)", milli)
	case milli > 0 && gpus == 0:
		return 0, fmt.Errorf("%d on a pod with 0 gpus: set gpus to 1 for a fraction", milli)
	case milli > 0 && milli < workload.MilliPerGPU && gpus != 1:
		return 0, fmt.Errorf("%d with gpus %d: a fraction applies to exactly one GPU", milli, gpus)
	case milli == workload.MilliPerGPU:
		return 0, nil
	}
	return milli, nil
}

// splitModels splits "A100|H100" and refuses empty names.
func splitModels(s string) ([]string, error) {
	var out []string
	for _, m := range strings.Split(s, "|") {
		m = strings.TrimSpace(m)
		if m == "" {
			return nil, fmt.Errorf("empty model name in %q", s)
		}
		out = append(out, m)
	}
	return out, nil
}

// WriteJobTraceCSV writes jobs in the corral CSV job-trace format, one row per
// pod set, so that generated traces can be saved, edited and replayed. Times
// are written in seconds; ReadJobTraceCSV reads them back to the microsecond.
func WriteJobTraceCSV(w io.Writer, jobs []Job) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvColumns); err != nil {
		return err
	}
	for _, j := range jobs {
		if len(j.PodSets) == 0 {
			return fmt.Errorf("job %s has no pod sets: the format cannot hold it", j.ID)
		}
		for i, ps := range j.PodSets {
			row := make([]string, 0, len(csvColumns))
			row = append(row, string(j.ID))
			if i == 0 {
				row = append(row,
					secondsText(j.Submit.Sub(Epoch)), j.Queue, j.User, strconv.Itoa(int(j.Priority)),
					strconv.Itoa(j.MinMembers), j.Topology.Required, j.Topology.Preferred,
					secondsText(j.Runtime), secondsText(j.ExpectedRuntime), secondsText(j.CheckpointInterval),
					strconv.FormatBool(j.Preemptible))
			} else {
				row = append(row, make([]string, len(jobColumns))...) // shared with the first row
			}
			r := ps.Request
			row = append(row, ps.Name, strconv.Itoa(ps.Count),
				strconv.FormatInt(r.CPUMilli, 10), strconv.FormatInt(r.MemMiB, 10),
				strconv.Itoa(r.GPUs), strconv.Itoa(r.GPUMilli), strings.Join(r.Models, "|"),
				strconv.FormatInt(r.GPUMemMiB, 10), r.MIGProfile)
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// secondsText writes a duration as seconds without a trailing ".0".
func secondsText(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}
