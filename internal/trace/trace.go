package trace

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/corral-dev/corral/data"
	"github.com/corral-dev/corral/internal/workload"
)

// Epoch is trace second 0: a job submitted at second s of a trace has
// Submit = Epoch + s. Fixed, so that runs never depend on the wall clock.
var Epoch = time.Unix(0, 0).UTC()

// Job is a job of a trace with the time it truly runs once started. The
// scheduler sees only the embedded workload.Job (ExpectedRuntime is the
// user's estimate); the simulator ends the job after Runtime.
type Job struct {
	*workload.Job
	Runtime time.Duration // true run time in the simulation; 0 = runs until the end
	Line    int           // line of the job in its file; 0 for generated jobs
	// CheckpointEvery and CheckpointJitter are how the job really
	// checkpoints, which its declared CheckpointInterval only approximates:
	// its own mean interval, and how much each interval varies (0..1).
	// Zero: exactly every declared interval (files; the generator's oracle).
	CheckpointEvery  time.Duration
	CheckpointJitter float64
}

// Trace is a list of jobs in file (or generation) order; the simulator orders
// them by Submit itself.
type Trace struct {
	Name string
	Jobs []Job
}

// Options tunes LoadTrace. File traces ignore Jobs and Load.
type Options struct {
	Seed int64
	// Cluster sizes generated traces to a cluster's capacity and topology;
	// generators fail without it.
	Cluster *ClusterSpec
	Jobs    int     // jobs to generate; 0 means the generator's default
	Load    float64 // offered GPU load as a share of capacity; 0 means the default
}

// openbTraces maps the openb trace names to their embedded files.
var openbTraces = map[string]string{
	"default":    "openb/openb_pod_list_default.csv",
	"gpushare40": "openb/openb_pod_list_gpushare40.csv",
	"multigpu20": "openb/openb_pod_list_multigpu20.csv",
	"gpuspec10":  "openb/openb_pod_list_gpuspec10.csv",
	"cpu050":     "openb/openb_pod_list_cpu050.csv",
}

// TraceNames lists the built-in traces and generators, for --help.
func TraceNames() []string {
	return []string{
		"openb:default", "openb:gpushare40", "openb:multigpu20", "openb:gpuspec10", "openb:cpu050",
		"gen:llm", "gen:mig",
	}
}

// LoadTrace reads a trace by name: a built-in openb trace ("openb:default"),
// a generator ("gen:llm?jobs=2000&load=0.9&seed=7"; parameters in the name win
// over opt), or a file path: .yaml/.yml is a corral YAML job trace, .csv is a
// corral CSV job trace when its header starts with "job," and an openb pod
// list when it starts with "name,"; a file of any name whose header starts
// "JobID|" is Slurm sacct --parsable2 output; "philly:PATH" is a Philly
// cluster_job_log.
func LoadTrace(spec string, opt Options) (*Trace, error) {
	switch {
	case strings.HasPrefix(spec, "openb:"):
		file, ok := openbTraces[strings.TrimPrefix(spec, "openb:")]
		if !ok {
			return nil, fmt.Errorf("unknown trace %q (built-in: %s)", spec, strings.Join(TraceNames(), ", "))
		}
		f, err := data.FS.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		t, err := ReadOpenbCSV(f, "data/"+file)
		if err != nil {
			return nil, err
		}
		t.Name = spec
		return t, nil
	case strings.HasPrefix(spec, "gen:"):
		return generate(spec, opt)
	case strings.HasPrefix(spec, "philly:"):
		return loadPhilly(strings.TrimPrefix(spec, "philly:"))
	}
	return loadTraceFile(spec)
}

func loadPhilly(path string) (*Trace, error) {
	if path == "" {
		return nil, fmt.Errorf("philly: needs the job log's path, e.g. philly:trace-data/cluster_job_log")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := ReadPhilly(f, path)
	if err != nil {
		return nil, err
	}
	t.Name = "philly:" + filepath.Base(path)
	return t, nil
}

func loadTraceFile(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) && !strings.ContainsAny(path, `/\.`) {
			return nil, fmt.Errorf("trace %q is neither a file nor a built-in trace (%s)", path, strings.Join(TraceNames(), ", "))
		}
		return nil, err
	}
	defer f.Close()
	var t *Trace
	rest := bufio.NewReader(f)
	head, _ := rest.Peek(64) // fewer bytes at the end of a short file is fine
	switch ext := strings.ToLower(filepath.Ext(path)); {
	case IsSacct(string(head)):
		t, err = ReadSacct(rest, path)
	case ext == ".yaml" || ext == ".yml":
		t, err = ReadJobTraceYAML(rest, path)
	case ext == ".csv":
		t, err = readCSVTrace(rest, path)
	default:
		return nil, fmt.Errorf("%s: unknown trace file type %q: want .csv, .yaml or .yml, sacct --parsable2 output (a header starting \"JobID|\"), or philly:PATH for a Philly job log", path, ext)
	}
	if err != nil {
		return nil, err
	}
	if t.Name == path { // the file did not name itself
		t.Name = filepath.Base(path)
	}
	return t, nil
}

// readCSVTrace picks the CSV reader by the first header column.
func readCSVTrace(r io.Reader, path string) (*Trace, error) {
	rest := bufio.NewReader(r)
	peek, _ := rest.Peek(64) // fewer bytes at the end of a short file is fine
	head := strings.TrimPrefix(string(peek), "\ufeff")
	switch {
	case strings.HasPrefix(head, "job,") || strings.HasPrefix(head, "job\n") || strings.HasPrefix(head, "job\r"):
		return ReadJobTraceCSV(rest, path)
	case strings.HasPrefix(head, "name,"):
		return ReadOpenbCSV(rest, path)
	}
	return nil, errorf(path, 1, "", "unknown CSV trace: the header must start with \"job,\" (corral job trace) or \"name,\" (openb pod list)")
}

// checkJob applies the rules every reader shares on top of
// workload.Job.Validate. line and field place the error.
func checkJob(j *workload.Job, file string, line int) error {
	if err := j.Validate(); err != nil {
		return errorf(file, line, "", "%v", err)
	}
	if j.MinMembers > j.Pods() {
		return errorf(file, line, "min_members", "%d is above the job's %d pods", j.MinMembers, j.Pods())
	}
	return nil
}
