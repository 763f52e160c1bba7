package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/workload"
)

// Microsoft's Philly job log (msr-fiddle/philly-traces, file
// cluster_job_log; Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU
// Clusters for DNN Training Workloads", USENIX ATC'19): one JSON array, one
// object per job with its virtual cluster, its submit time and each
// scheduling attempt with the machines and GPUs it ran on:
//
//	{"status": "Pass", "vc": "ee9e8c", "jobid": "application_1506638472019_14199",
//	 "submitted_time": "2017-10-07 01:11:39", "user": "ce2f4c",
//	 "attempts": [{"start_time": "2017-10-07 01:13:30", "end_time": "2017-10-09 06:53:12",
//	               "detail": [{"ip": "m412", "gpus": ["gpu0", "gpu1"]}]}]}
//
// The trace is not redistributable here (no licence is given with it); a
// user downloads it and replays it with `corral sim --trace philly:PATH`.
//
// A job becomes one gang with one pod per machine of its last attempt that
// started, each pod asking for the GPUs it held there; the virtual cluster
// is the queue. The runtime is that attempt's end - start: earlier attempts
// are the tries Philly retried after a failure, which the simulator's own
// failure model (--failures) stands for. Philly records no CPU, memory or
// declared runtime, so pods ask for GPUs only and declare no runtime.
const phillyTimeLayout = "2006-01-02 15:04:05"

// phillyMaxBytes bounds what ReadPhilly reads into memory: the published
// cluster_job_log of 117,325 jobs is far below it.
const phillyMaxBytes = 1 << 30

type phillyJob struct {
	Status        string          `json:"status"`
	VC            string          `json:"vc"`
	JobID         string          `json:"jobid"`
	SubmittedTime *string         `json:"submitted_time"`
	User          string          `json:"user"`
	Attempts      []phillyAttempt `json:"attempts"`
}

type phillyAttempt struct {
	StartTime *string         `json:"start_time"`
	EndTime   *string         `json:"end_time"`
	Detail    []phillyMachine `json:"detail"`
}

type phillyMachine struct {
	IP   string   `json:"ip"`
	GPUs []string `json:"gpus"`
}

// ReadPhilly reads a Philly cluster_job_log. Jobs with no attempt that
// started, or that held no GPU, are left out (they say nothing about a GPU
// runtime); a last attempt with no end (the job was running when the log was
// cut) runs to the end of the simulation. Times have no zone (the cluster's
// local time); the earliest submit is second 0. Errors name the line of the
// job's object in the file.
func ReadPhilly(r io.Reader, name string) (*Trace, error) {
	data, err := io.ReadAll(io.LimitReader(r, phillyMaxBytes+1))
	if err != nil {
		return nil, errorf(name, 0, "", "%v", err)
	}
	if len(data) > phillyMaxBytes {
		return nil, errorf(name, 0, "", "larger than %d bytes", phillyMaxBytes)
	}
	lines := newLineIndex(data)
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('[') {
		return nil, errorf(name, lines.at(dec.InputOffset()), "", "want a JSON array of jobs (Philly's cluster_job_log)")
	}
	var rows []importedRow
	seen := map[string]int{}
	for dec.More() {
		// The offset is just past the previous element's end: skip to
		// where this one starts to name its line.
		line := lines.at(lines.nextNonSpace(dec.InputOffset()))
		var pj phillyJob
		if err := dec.Decode(&pj); err != nil {
			return nil, errorf(name, lines.at(dec.InputOffset()), "", "%v", jsonMessage(err))
		}
		j, submit, runtime, err := phillyToJob(pj, seen, line)
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				e.File, e.Line = name, line
				return nil, e
			}
			return nil, errorf(name, line, "", "%v", err)
		}
		if j == nil {
			continue
		}
		j.Source = fmt.Sprintf("%s:%d", name, line)
		rows = append(rows, importedRow{job: j, submit: submit, runtime: runtime, line: line})
	}
	if _, err := dec.Token(); err != nil {
		return nil, errorf(name, lines.at(dec.InputOffset()), "", "%v", jsonMessage(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errorf(name, lines.at(dec.InputOffset()), "", "data after the array of jobs")
	}
	if len(rows) == 0 {
		return nil, errorf(name, 0, "", "no job that started on a GPU: nothing to replay")
	}
	return importedTrace(name, rows, "submitted_time")
}

// phillyToJob converts one entry; a nil job (and no error) leaves it out.
// Errors are *Error without File and Line, which the caller fills in.
func phillyToJob(pj phillyJob, seen map[string]int, line int) (*workload.Job, time.Time, time.Duration, error) {
	fail := func(field, format string, args ...any) (*workload.Job, time.Time, time.Duration, error) {
		return nil, time.Time{}, 0, errorf("", 0, field, format, args...)
	}
	id := strings.TrimSpace(pj.JobID)
	if id == "" {
		return fail("jobid", "empty job id")
	}
	if prev, dup := seen[id]; dup {
		return fail("jobid", "job %s already appears on line %d", id, prev)
	}
	seen[id] = line
	submit, err := phillyTime(pj.SubmittedTime)
	if err != nil || submit.IsZero() {
		return fail("submitted_time", "%s: want a time like 2017-10-07 01:11:39", quoteTime(pj.SubmittedTime))
	}

	// The last attempt that started is the run that ended as the status
	// says; attempts with no start are logging gaps.
	var last *phillyAttempt
	var start time.Time
	for i := len(pj.Attempts) - 1; i >= 0 && last == nil; i-- {
		s, err := phillyTime(pj.Attempts[i].StartTime)
		if err != nil {
			return fail(fmt.Sprintf("attempts[%d].start_time", i), "%s: want a time, null or \"None\"", quoteTime(pj.Attempts[i].StartTime))
		}
		if !s.IsZero() {
			last, start = &pj.Attempts[i], s
		}
	}
	if last == nil {
		return nil, time.Time{}, 0, nil // never ran
	}
	end, err := phillyTime(last.EndTime)
	if err != nil {
		return fail("end_time", "%s: want a time, null or \"None\"", quoteTime(last.EndTime))
	}
	var runtime time.Duration // still running when the log was cut: runs to the end
	if !end.IsZero() {
		if end.Before(start) {
			return fail("end_time", "%s is before start_time %s", *last.EndTime, *last.StartTime)
		}
		runtime = end.Sub(start)
	}
	// One pod per machine; machines holding the same number of GPUs form
	// one pod set, in order of first appearance.
	var sets []workload.PodSet
	index := map[int]int{}
	machines := map[string]bool{}
	for i, m := range last.Detail {
		if m.IP != "" {
			if machines[m.IP] {
				return fail(fmt.Sprintf("detail[%d].ip", i), "machine %s appears twice in one attempt", m.IP)
			}
			machines[m.IP] = true
		}
		n := len(m.GPUs)
		if n == 0 {
			continue
		}
		if n > defaultLimits.gpusPerPod {
			return fail(fmt.Sprintf("detail[%d].gpus", i), "%d GPUs on one machine is above %d", n, defaultLimits.gpusPerPod)
		}
		k, ok := index[n]
		if !ok {
			if len(sets) == defaultLimits.podSetsPerJob {
				return fail("detail", "more than %d different GPU counts per machine", defaultLimits.podSetsPerJob)
			}
			k = len(sets)
			index[n] = k
			sets = append(sets, workload.PodSet{Name: fmt.Sprintf("gpus-%d", n), Request: workload.Request{GPUs: n}})
		}
		sets[k].Count++
	}
	if len(sets) == 0 {
		return nil, time.Time{}, 0, nil // held no GPU
	}
	queue := strings.TrimSpace(pj.VC)
	if queue == "" {
		queue = "default"
	}
	return &workload.Job{ID: workload.JobID(id), Queue: queue, User: strings.TrimSpace(pj.User), PodSets: sets}, submit, runtime, nil
}

// phillyTime reads a Philly time; null, "", "None" and "NA" are the zero
// time (the README: attempts may lack start or end times).
func phillyTime(s *string) (time.Time, error) {
	if s == nil {
		return time.Time{}, nil
	}
	switch v := strings.TrimSpace(*s); v {
	case "", "None", "NA":
		return time.Time{}, nil
	default:
		return time.Parse(phillyTimeLayout, v)
	}
}

func quoteTime(s *string) string {
	if s == nil {
		return "null"
	}
	return fmt.Sprintf("%q", *s)
}

// jsonMessage drops encoding/json's "json: " prefix; the file name says it.
func jsonMessage(err error) string {
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		return "unexpected end of file: the array of jobs is not closed"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// lineIndex maps byte offsets to 1-based line numbers.
type lineIndex struct {
	data   []byte
	starts []int // offset of each line's first byte
}

func newLineIndex(data []byte) lineIndex {
	starts := []int{0}
	for i, b := range data {
		if b == '\n' {
			starts = append(starts, i+1)
		}
	}
	return lineIndex{data: data, starts: starts}
}

func (l lineIndex) at(off int64) int {
	return sort.Search(len(l.starts), func(i int) bool { return int64(l.starts[i]) > off })
}

// nextNonSpace skips white space and the comma between array elements.
func (l lineIndex) nextNonSpace(off int64) int64 {
	for off < int64(len(l.data)) {
		switch l.data[off] {
		case ' ', '\t', '\r', '\n', ',':
			off++
		default:
			return off
		}
	}
	return off
}
