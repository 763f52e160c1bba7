// Package trace reads what a simulation runs on: clusters (presets and user
// YAML files) and job traces (the openb pod lists, corral's own CSV and YAML
// job traces, and seeded synthetic generators). It is a driver-side package: it
// reads files and the embedded data, and hands the engine plain values.
//
// Every reader takes an io.Reader and a name used in messages, so that errors
// read "jobs.csv:12: gpus: negative value -1" and fuzzers never touch disk.
// The formats are documented in docs/formats.md.
package trace

import (
	"fmt"
	"strings"
)

// Error is a problem in an input, with where it was found.
type Error struct {
	File  string // the name given to the reader
	Line  int    // 1-based; 0 when the problem is the input as a whole
	Field string // CSV column or YAML field, "" when none applies
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// errorf builds an *Error.
func errorf(file string, line int, field, format string, args ...any) *Error {
	return &Error{File: file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Limits keep a hostile or mistyped input from asking for unbounded memory or
// from overflowing the int64 sums the engine makes (GPU-milli of a job, of a
// domain). They are far above any real cluster or job.
type limits struct {
	nodes         int // nodes in one cluster
	gpusPerNode   int
	gpus          int   // devices in one cluster
	podsPerSet    int   // pods in one pod set
	gpusPerPod    int   // whole GPUs one pod asks for
	podSetsPerJob int   // pod sets of one job
	seconds       int64 // largest time value in a trace, in seconds
}

var defaultLimits = limits{
	nodes:         100_000,
	gpusPerNode:   64,
	gpus:          1_000_000,
	podsPerSet:    1_000_000,
	gpusPerPod:    1_024,
	podSetsPerJob: 64,
	seconds:       1_000_000_000, // about 31.7 years
}
