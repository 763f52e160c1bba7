package trace

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/workload"
)

// Slurm accounting records, as `sacct --parsable2` prints them: a header of
// field names and one job per line, fields separated by "|". This lets a
// Slurm site replay its own history through corral:
//
//	sacct --allocations --parsable2 --starttime 2026-01-01 \
//	  --format JobID,Submit,Start,End,State,NNodes,AllocTRES,Account,Partition,Timelimit,User > jobs.sacct
//	corral sim --cluster my-cluster.yaml --trace jobs.sacct
//
// Each allocation becomes a job of NNodes pods (one per node, a gang: Slurm
// starts an allocation whole) asking for an equal share of its AllocTRES
// (cpu, mem, gres/gpu). Steps ("123.batch", "123.0") are left out: the
// allocation holds what its steps use.
var (
	sacctRequired = []string{"JobID", "Submit", "Start", "End", "NNodes", "AllocTRES"}
	sacctOptional = []string{"State", "Account", "Partition", "Timelimit", "JobName", "User"}
)

// IsSacct reports whether a file's first line is a sacct --parsable2 header.
func IsSacct(head string) bool {
	head = strings.TrimPrefix(head, "\ufeff")
	return strings.HasPrefix(head, "JobID|") || strings.HasPrefix(head, "JobIDRaw|")
}

// ReadSacct reads sacct --parsable2 output. Times are the cluster's local
// time as sacct prints them (no zone); the earliest submit becomes trace
// second 0. Allocations that never started (Start "Unknown" or "None", e.g.
// cancelled while pending) are left out, since they say nothing about the
// runtime; so are allocations with no resources. name places errors and each
// job's Source.
func ReadSacct(r io.Reader, name string) (*Trace, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, errorf(name, 1, "", "%v", err)
		}
		return nil, errorf(name, 1, "", "empty file: want sacct --parsable2 output with its header")
	}
	header := strings.Split(strings.TrimPrefix(strings.TrimRight(sc.Text(), "\r"), "\ufeff"), "|")
	col := map[string]int{}
	for i, h := range header {
		if h == "JobIDRaw" && !containsStr(header, "JobID") {
			h = "JobID"
		}
		col[h] = i
	}
	for _, c := range sacctRequired {
		if _, ok := col[c]; !ok {
			return nil, errorf(name, 1, c, "missing column: sacct --format needs %s", strings.Join(sacctRequired, ","))
		}
	}
	var rows []importedRow
	seen := map[string]int{}
	for line := 2; sc.Scan(); line++ {
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		f := strings.Split(text, "|")
		if len(f) != len(header) {
			return nil, errorf(name, line, "", "%d fields, the header has %d (a \"|\" inside a job name? use --parsable2 without JobName)", len(f), len(header))
		}
		get := func(c string) string {
			if i, ok := col[c]; ok {
				return strings.TrimSpace(f[i])
			}
			return ""
		}
		id := get("JobID")
		if id == "" {
			return nil, errorf(name, line, "JobID", "empty job id")
		}
		if strings.Contains(id, ".") {
			continue // a step of an allocation
		}
		if prev, dup := seen[id]; dup {
			return nil, errorf(name, line, "JobID", "job %s already appears on line %d", id, prev)
		}
		seen[id] = line
		submit, err := sacctTime(get("Submit"))
		if err != nil || submit.IsZero() {
			return nil, errorf(name, line, "Submit", "%q: want a time like 2026-01-02T03:04:05", get("Submit"))
		}
		start, err := sacctTime(get("Start"))
		if err != nil {
			return nil, errorf(name, line, "Start", "%q: want a time, Unknown or None", get("Start"))
		}
		if start.IsZero() {
			continue // never ran
		}
		end, err := sacctTime(get("End"))
		if err != nil {
			return nil, errorf(name, line, "End", "%q: want a time, Unknown or None", get("End"))
		}
		var runtime time.Duration // still running when sacct ran: runs to the end
		if !end.IsZero() {
			if end.Before(start) {
				return nil, errorf(name, line, "End", "%s is before Start %s", get("End"), get("Start"))
			}
			runtime = end.Sub(start)
		}
		nodes, err := strconv.Atoi(get("NNodes"))
		if err != nil || nodes < 1 || nodes > defaultLimits.podsPerSet {
			return nil, errorf(name, line, "NNodes", "%q: want 1..%d", get("NNodes"), defaultLimits.podsPerSet)
		}
		req, err := sacctTRES(get("AllocTRES"), nodes)
		if err != nil {
			return nil, errorf(name, line, "AllocTRES", "%v", err)
		}
		if req.GPUs == 0 && req.CPUMilli == 0 && req.MemMiB == 0 {
			continue // no resources recorded
		}
		limit, err := sacctDuration(get("Timelimit"))
		if err != nil {
			return nil, errorf(name, line, "Timelimit", "%v", err)
		}
		queue := get("Account")
		if queue == "" {
			queue = get("Partition")
		}
		if queue == "" {
			queue = "default"
		}
		// The time limit is what Slurm's own backfill plans with, so it is
		// the job's estimate here too; it is not a MaxRuntime, since a
		// job slowed by a worse placement in the simulation should not be
		// killed for it.
		j := &workload.Job{
			ID:              workload.JobID(id),
			Queue:           queue,
			User:            get("User"),
			ExpectedRuntime: limit,
			PodSets:         []workload.PodSet{{Name: "main", Count: nodes, Request: req}},
			Source:          fmt.Sprintf("%s:%d", name, line),
		}
		rows = append(rows, importedRow{job: j, submit: submit, runtime: runtime, line: line})
	}
	if err := sc.Err(); err != nil {
		return nil, errorf(name, 0, "", "%v", err)
	}
	if len(rows) == 0 {
		return nil, errorf(name, 0, "", "no allocation that started: nothing to replay")
	}
	return importedTrace(name, rows, "Submit")
}

func containsStr(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// sacctTime reads sacct's ISO local time; "Unknown", "None" and "" are the
// zero time.
func sacctTime(s string) (time.Time, error) {
	switch s {
	case "", "Unknown", "None":
		return time.Time{}, nil
	}
	return time.Parse("2006-01-02T15:04:05", s)
}

// sacctDuration reads a Timelimit: [D-]HH:MM:SS, MM:SS or minutes; 0 for
// UNLIMITED, Partition_Limit or empty (no declared limit).
func sacctDuration(s string) (time.Duration, error) {
	switch s {
	case "", "UNLIMITED", "Partition_Limit", "INVALID":
		return 0, nil
	}
	orig, days := s, 0
	if d, rest, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q: want [D-]HH:MM:SS", orig)
		}
		days, s = n, rest
	}
	parts := strings.Split(s, ":")
	if len(parts) > 3 {
		return 0, fmt.Errorf("%q: want [D-]HH:MM:SS", orig)
	}
	var v []int
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q: want [D-]HH:MM:SS", orig)
		}
		v = append(v, n)
	}
	var h, m, sec int
	switch len(v) {
	case 1:
		m = v[0] // Slurm reads a bare number as minutes
		if days > 0 {
			h, m = v[0], 0 // D-HH
		}
	case 2:
		if days > 0 {
			h, m = v[0], v[1] // D-HH:MM
		} else {
			m, sec = v[0], v[1] // MM:SS
		}
	case 3:
		h, m, sec = v[0], v[1], v[2]
	}
	return time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec)*time.Second, nil
}

// sacctTRES splits an allocation's trackable resources
// ("cpu=16,mem=64G,node=2,billing=16,gres/gpu=8") over its nodes. GPUs
// and CPUs must divide evenly: Slurm allocates whole GPUs per node, and an
// uneven split would be a guess.
func sacctTRES(s string, nodes int) (workload.Request, error) {
	var req workload.Request
	var cpus, gpus, memMiB int64
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return req, fmt.Errorf("%q: want key=value items", kv)
		}
		switch {
		case k == "cpu":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return req, fmt.Errorf("cpu=%s: want a count", v)
			}
			cpus = n
		case k == "mem":
			n, err := sacctMemMiB(v)
			if err != nil {
				return req, err
			}
			memMiB = n
		case k == "gres/gpu":
			// The total; typed entries (gres/gpu:a100=8) repeat it.
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return req, fmt.Errorf("gres/gpu=%s: want a count", v)
			}
			gpus = n
		}
	}
	n := int64(nodes)
	if gpus%n != 0 {
		return req, fmt.Errorf("%d GPUs over %d nodes: not an equal share per node", gpus, nodes)
	}
	if gpus/n > int64(defaultLimits.gpusPerPod) {
		return req, fmt.Errorf("%d GPUs per node is above %d", gpus/n, defaultLimits.gpusPerPod)
	}
	req.GPUs = int(gpus / n)
	req.CPUMilli = cpus * 1000 / n
	req.MemMiB = memMiB / n
	return req, nil
}

// sacctMemMiB reads a TRES memory size: a number with a K, M, G, T or P
// suffix (M when none).
func sacctMemMiB(v string) (int64, error) {
	mult := map[byte]float64{'K': 1.0 / 1024, 'M': 1, 'G': 1024, 'T': 1024 * 1024, 'P': 1024 * 1024 * 1024}
	f := 1.0
	if v != "" {
		if m, ok := mult[v[len(v)-1]]; ok {
			f, v = m, v[:len(v)-1]
		}
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || x < 0 || x*f > 1<<40 {
		return 0, fmt.Errorf("mem=%s: want a size such as 64G", v)
	}
	return int64(x * f), nil
}
