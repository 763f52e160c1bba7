package trace

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/workload"
)

// The openb pod-list columns (Weng et al., ATC'23). multigpu20 publishes only
// the first five, so the times are optional: without creation_time every pod
// arrives at second 0 and runs forever, which is all the FGD protocol needs.
var (
	openbRequired = []string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}
	openbOptional = []string{"gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time"}
)

// ReadOpenbCSV reads an openb pod list: one single-pod job per row, in queue
// "default". qos and pod_phase are read past: the FGD protocol and the replay
// place every pod whatever its class or final phase. name is the file name
// used in messages and in each job's Source.
func ReadOpenbCSV(r io.Reader, name string) (*Trace, error) {
	f, err := openCSV(r, name, openbRequired, openbOptional)
	if err != nil {
		return nil, err
	}
	t := &Trace{Name: name}
	seen := map[workload.JobID]int{} // id -> line
	for {
		ok, err := f.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		j, err := openbRow(f)
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[j.ID]; dup {
			return nil, f.errAt("name", "pod %q already appears on line %d", j.ID, prev)
		}
		seen[j.ID] = j.Line
		t.Jobs = append(t.Jobs, j)
	}
	return t, nil
}

// openbRow turns the current record into a job.
func openbRow(f *csvFile) (Job, error) {
	line := f.line()
	id := f.str("name")
	if id == "" {
		return Job{}, f.errAt("name", "empty pod name")
	}
	var req workload.Request
	var err error
	if req.CPUMilli, err = f.int64("cpu_milli", 0); err != nil {
		return Job{}, err
	}
	if req.MemMiB, err = f.int64("memory_mib", 0); err != nil {
		return Job{}, err
	}
	if req.GPUs, err = f.intMax("num_gpu", 0, int64(defaultLimits.gpusPerPod)); err != nil {
		return Job{}, err
	}
	milli, err := f.intMax("gpu_milli", 0, 1<<31)
	if err != nil {
		return Job{}, err
	}
	switch {
	case milli > workload.MilliPerGPU:
		return Job{}, f.errAt("gpu_milli", "%d is above one GPU (1000)", milli)
	case req.GPUs == 0 && milli > 0:
		return Job{}, f.errAt("gpu_milli", "%d on a pod with num_gpu 0", milli)
	case req.GPUs > 1 && milli < workload.MilliPerGPU:
		// openb writes 1000 on every multi-GPU row: a fraction of several
		// GPUs is not something the trace or the scheduler can express.
		return Job{}, f.errAt("gpu_milli", "%d with num_gpu %d: a fraction applies to one GPU only", milli, req.GPUs)
	case req.GPUs == 1 && milli == 0:
		return Job{}, f.errAt("gpu_milli", "0 on a pod with num_gpu 1: want 1..1000")
	case req.GPUs == 1 && milli < workload.MilliPerGPU:
		req.GPUMilli = milli
	}
	if spec := f.str("gpu_spec"); spec != "" {
		for _, m := range strings.Split(spec, "|") {
			if m = strings.TrimSpace(m); m == "" {
				return Job{}, f.errAt("gpu_spec", "empty model in %q", spec)
			}
			req.Models = append(req.Models, strings.TrimSpace(m))
		}
	}

	submit, runtime, err := openbTimes(f)
	if err != nil {
		return Job{}, err
	}
	j := &workload.Job{
		ID:      workload.JobID(id),
		Queue:   "default",
		Submit:  Epoch.Add(submit),
		PodSets: []workload.PodSet{{Name: "main", Count: 1, Request: req}},
		Source:  fmt.Sprintf("%s:%d", f.name, line),
	}
	if err := checkJob(j, f.name, line); err != nil {
		return Job{}, err
	}
	return Job{Job: j, Runtime: runtime, Line: line}, nil
}

// openbTimes reads the submit offset and the true runtime. The runtime is
// deletion - scheduled when both are given and the difference is positive
// (the time the pod held its node), else deletion - creation (pending pods
// have no scheduled_time), else 0: the pod runs until the end.
func openbTimes(f *csvFile) (submit, runtime time.Duration, err error) {
	if !f.has("creation_time") {
		return 0, 0, nil
	}
	created, ok, err := f.seconds("creation_time")
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, f.errAt("creation_time", "empty: every pod needs its arrival time")
	}
	deleted, hasDel, err := f.seconds("deletion_time")
	if err != nil {
		return 0, 0, err
	}
	scheduled, hasSched, err := f.seconds("scheduled_time")
	if err != nil {
		return 0, 0, err
	}
	switch {
	case hasDel && hasSched && deleted > scheduled:
		runtime = deleted - scheduled
	case hasDel && deleted > created:
		runtime = deleted - created
	}
	return created, runtime, nil
}
