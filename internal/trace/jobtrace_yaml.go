package trace

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/corral-dev/corral/internal/workload"
)

// The corral YAML job trace; field names match the CSV columns.
type jobFileYAML struct {
	Name string    `yaml:"name"`
	Jobs []jobYAML `yaml:"jobs"`
}

type jobYAML struct {
	ID                 string       `yaml:"id"`
	Submit             *float64     `yaml:"submit"`
	Queue              string       `yaml:"queue"`
	User               string       `yaml:"user"`
	Priority           int32        `yaml:"priority"`
	MinMembers         int          `yaml:"min_members"`
	RequiredLevel      string       `yaml:"required_level"`
	PreferredLevel     string       `yaml:"preferred_level"`
	Runtime            float64      `yaml:"runtime"`
	ExpectedRuntime    float64      `yaml:"expected_runtime"`
	CheckpointInterval float64      `yaml:"checkpoint_interval"`
	Preemptible        bool         `yaml:"preemptible"`
	PodSets            []podSetYAML `yaml:"pod_sets"`
}

type podSetYAML struct {
	Name     string   `yaml:"name"`
	Count    *int     `yaml:"count"` // nil: 1
	CPUMilli int64    `yaml:"cpu_milli"`
	MemMiB   int64    `yaml:"memory_mib"`
	GPUs     int      `yaml:"gpus"`
	GPUMilli int      `yaml:"gpu_milli"`
	Models   []string `yaml:"models"`
	GPUMem   int64    `yaml:"gpu_memory_mib"`
	MIG      string   `yaml:"mig_profile"`
}

// ReadJobTraceYAML reads a corral YAML job trace. name is the file name used
// in messages and in each job's Source.
func ReadJobTraceYAML(r io.Reader, name string) (*Trace, error) {
	var file jobFileYAML
	doc, err := decodeYAML(r, name, &file)
	if err != nil {
		return nil, err
	}
	t := &Trace{Name: name}
	if file.Name != "" {
		t.Name = file.Name
	}
	seen := map[workload.JobID]int{}
	for i := range file.Jobs {
		j, err := yamlJob(doc, &file.Jobs[i], i)
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[j.ID]; dup {
			return nil, doc.errAt("id", []any{"jobs", i, "id"}, "job %q is already defined on line %d", j.ID, prev)
		}
		seen[j.ID] = j.Line
		t.Jobs = append(t.Jobs, j)
	}
	return t, nil
}

// yamlJob checks and converts the i-th job.
func yamlJob(doc *yamlDoc, y *jobYAML, i int) (Job, error) {
	at := func(field string, more ...any) []any { return append([]any{"jobs", i, field}, more...) }
	line := doc.line("jobs", i)
	if y.ID == "" {
		return Job{}, doc.errAt("id", []any{"jobs", i}, "missing job id")
	}
	j := &workload.Job{
		ID:          workload.JobID(y.ID),
		Queue:       y.Queue,
		User:        y.User,
		Priority:    y.Priority,
		MinMembers:  y.MinMembers,
		Topology:    workload.Topology{Required: y.RequiredLevel, Preferred: y.PreferredLevel},
		Preemptible: y.Preemptible,
		Source:      fmt.Sprintf("%s:%d", doc.name, line),
	}
	if j.Queue == "" {
		j.Queue = "default"
	}
	if y.Submit == nil {
		return Job{}, doc.errAt("submit", []any{"jobs", i}, "missing: every job needs its arrival time")
	}
	var submit, runtime time.Duration
	for _, tm := range []struct {
		field string
		v     float64
		out   *time.Duration
	}{
		{"submit", *y.Submit, &submit},
		{"runtime", y.Runtime, &runtime},
		{"expected_runtime", y.ExpectedRuntime, &j.ExpectedRuntime},
		{"checkpoint_interval", y.CheckpointInterval, &j.CheckpointInterval},
	} {
		d, err := secondsDuration(tm.v)
		if err != nil {
			return Job{}, doc.errAt(tm.field, at(tm.field), "%v", err)
		}
		*tm.out = d
	}
	j.Submit = Epoch.Add(submit)
	if j.MinMembers < 0 {
		return Job{}, doc.errAt("min_members", at("min_members"), "negative value %d", j.MinMembers)
	}
	if len(y.PodSets) == 0 {
		return Job{}, doc.errAt("pod_sets", at("pod_sets"), "job %q has no pod sets", y.ID)
	}
	if len(y.PodSets) > defaultLimits.podSetsPerJob {
		return Job{}, doc.errAt("pod_sets", at("pod_sets"), "job %q has more than %d pod sets", y.ID, defaultLimits.podSetsPerJob)
	}
	for k := range y.PodSets {
		ps, err := yamlPodSet(doc, &y.PodSets[k], func(field string) []any { return at("pod_sets", k, field) })
		if err != nil {
			return Job{}, err
		}
		for _, other := range j.PodSets {
			if other.Name == ps.Name {
				return Job{}, doc.errAt("name", at("pod_sets", k, "name"), "job %q has two pod sets named %q", y.ID, ps.Name)
			}
		}
		j.PodSets = append(j.PodSets, ps)
	}
	if err := checkJob(j, doc.name, line); err != nil {
		var e *Error
		if errors.As(err, &e) && e.Field != "" {
			e.Line = doc.line(at(e.Field)...)
		}
		return Job{}, err
	}
	return Job{Job: j, Runtime: runtime, Line: line}, nil
}

// yamlPodSet checks and converts one pod set; at gives a field's path.
func yamlPodSet(doc *yamlDoc, y *podSetYAML, at func(string) []any) (workload.PodSet, error) {
	ps := workload.PodSet{Name: y.Name, Count: 1}
	if ps.Name == "" {
		ps.Name = "main"
	}
	if y.Count != nil {
		ps.Count = *y.Count
	}
	r := &ps.Request
	r.CPUMilli, r.MemMiB, r.GPUs, r.Models = y.CPUMilli, y.MemMiB, y.GPUs, y.Models
	checks := []struct {
		field string
		v     int64
		max   int64
	}{
		{"count", int64(ps.Count), int64(defaultLimits.podsPerSet)},
		{"cpu_milli", y.CPUMilli, -1},
		{"memory_mib", y.MemMiB, -1},
		{"gpus", int64(y.GPUs), int64(defaultLimits.gpusPerPod)},
		{"gpu_milli", int64(y.GPUMilli), -1},
		{"gpu_memory_mib", y.GPUMem, -1},
	}
	for _, c := range checks {
		switch {
		case c.v < 0:
			return ps, doc.errAt(c.field, at(c.field), "negative value %d", c.v)
		case c.max >= 0 && c.v > c.max:
			return ps, doc.errAt(c.field, at(c.field), "%d is above the limit of %d", c.v, c.max)
		}
	}
	if ps.Count == 0 {
		return ps, doc.errAt("count", at("count"), "0 pods: a pod set needs at least one")
	}
	var err error
	if r.GPUMilli, err = gpuFraction(r.GPUs, y.GPUMilli); err != nil {
		return ps, doc.errAt("gpu_milli", at("gpu_milli"), "%v", err)
	}
	for _, m := range r.Models {
		if m == "" {
			return ps, doc.errAt("models", at("models"), "empty model name")
		}
	}
	r.GPUMemMiB, r.MIGProfile = y.GPUMem, y.MIG
	if err := deviceShare(r); err != nil {
		return ps, doc.errAt(deviceField(r), at(deviceField(r)), "%v", err)
	}
	return ps, nil
}
