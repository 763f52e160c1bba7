package trace

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/data"
	"github.com/corral-dev/corral/internal/workload"
)

// Figures the gen:llm generator is built on (see /work/shared/data/README.md
// and docs/formats.md):
//   - Job size: Acme's Kalos cluster (Hu et al., NSDI'24), the LLM-training
//     cluster of the published set, averages 26.8 GPUs per GPU job, up to
//     1,024. Seren (5.7), Helios (3.7, up to 2,048) and Philly (1.9) are
//     older, smaller-job mixes and are not used.
//   - Runtime: the 83,154 Philly runtimes (Jeon et al., ATC'19), zeros
//     dropped and capped at a week.
const (
	kalosMeanGPUs = 26.8
	kalosMaxGPUs  = 1024
	maxRuntime    = 7 * 24 * time.Hour
	// highPriority is the share of jobs at priority 100 (the rest are at 0
	// and preemptible): enough to exercise preemption, not to dominate.
	highPriority = 0.1
	// llmCheckpoint is how often multi-node jobs checkpoint.
	llmCheckpoint = 30 * time.Minute

	defaultGenJobs = 2000
	defaultGenLoad = 0.9

	// Realistic information (issue 15; docs/formats.md). Kubernetes has no
	// runtime field, so most jobs declare nothing; the share that does is
	// an assumption, not a measured figure.
	defaultDeclared = 0.2
	// A job's own mean checkpoint interval is its declared one times
	// U(1-spread, 1+spread), and each interval varies by ±jitter of it:
	// assumptions standing in for data loading, evaluation and storage
	// contention, which no published trace measures.
	defaultCkptSpread = 0.5
	defaultCkptJitter = 0.25
)

// Runtime estimate modes of gen:llm (parameter est).
const (
	estModel = "model" // a share of jobs declare, over-estimating (default)
	estNone  = "none"  // no job declares a runtime
	estHours = "hours" // every job declares its runtime rounded up to the hour (before issue 15)
	estExact = "exact" // every job declares its true runtime (the oracle)
)

// popularEstimates are the round values users give as runtime estimates.
// Tsafrir, Etsion and Feitelson ("Modeling User Runtime Estimates", JSSPP
// 2005) found estimates modal: about 20 round values (minutes, hours, a day,
// the queue's limit) cover some 90% of jobs.
var popularEstimates = []time.Duration{
	5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 20 * time.Minute, 30 * time.Minute, 45 * time.Minute,
	time.Hour, 90 * time.Minute, 2 * time.Hour, 3 * time.Hour, 4 * time.Hour, 6 * time.Hour, 8 * time.Hour,
	10 * time.Hour, 12 * time.Hour, 18 * time.Hour, 24 * time.Hour, 36 * time.Hour, 48 * time.Hour,
	72 * time.Hour, 96 * time.Hour, 120 * time.Hour, maxRuntime,
}

// estimate is a user's runtime estimate for a job that runs runtime: the
// accuracy runtime / estimate is uniform on (0, 1] (Mu'alem and Feitelson,
// IEEE TPDS 12(6), 2001, found it nearly uniform on the SP2 logs), and the
// estimate is rounded up to the next popular value, at most the week the
// generator's runtimes are capped at. u is the uniform draw in [0, 1).
func estimate(runtime time.Duration, u float64) time.Duration {
	raw := float64(runtime) / (1 - u) // 1-u is in (0, 1]
	for _, p := range popularEstimates {
		if float64(p) >= raw {
			return p
		}
	}
	return maxRuntime
}

var llmQueues = []string{"team-a", "team-b", "team-c"}

// genParams are the generator's settings after merging the spec and Options.
type genParams struct {
	jobs int
	load float64
	seed int64
	// late makes the last queue (team-c) a newly active one: its jobs
	// arrive only in the last (1-late) of the span, so it must win its
	// share back from queues that borrowed it. 0 leaves every queue active
	// from the start.
	late float64
	// ckpt, when set, makes every job checkpoint at this interval (by
	// default only multi-node jobs do, every 30 minutes); restart is the
	// restart overhead of every job (default none).
	ckpt, restart time.Duration
	// est is how runtimes are declared (estModel ...); declared is the
	// share of jobs that declare one under estModel.
	est      string
	declared float64
	// ckptSpread and ckptJitter shape the true checkpoints (0 and 0: the
	// declared interval exactly).
	ckptSpread, ckptJitter float64
	// users per queue (0: jobs name no user) and how far a user's runtimes
	// stray from the user's scale (genusers.go).
	users      int
	userSpread float64
}

// parseGen reads "gen:llm?jobs=2000&load=0.9&seed=7"; parameters given in
// the spec win over opt, which wins over the defaults.
func parseGen(spec string, opt Options) (genParams, error) {
	p := genParams{jobs: defaultGenJobs, load: defaultGenLoad, seed: opt.Seed, est: estModel,
		declared: defaultDeclared, ckptSpread: defaultCkptSpread, ckptJitter: defaultCkptJitter,
		users: defaultUsers, userSpread: defaultUserSpread}
	if opt.Jobs > 0 {
		p.jobs = opt.Jobs
	}
	if opt.Load > 0 {
		p.load = opt.Load
	}
	name, query, _ := strings.Cut(strings.TrimPrefix(spec, "gen:"), "?")
	if name != "llm" && name != "mig" {
		return p, fmt.Errorf("unknown generator %q (known: gen:llm, gen:mig)", spec)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return p, fmt.Errorf("%s: %v", spec, err)
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := q.Get(k)
		switch k {
		case "jobs":
			p.jobs, err = strconv.Atoi(v)
		case "load":
			p.load, err = strconv.ParseFloat(v, 64)
		case "seed":
			p.seed, err = strconv.ParseInt(v, 10, 64)
		case "late":
			p.late, err = strconv.ParseFloat(v, 64)
		case "declared":
			p.declared, err = strconv.ParseFloat(v, 64)
		case "ckptspread":
			p.ckptSpread, err = strconv.ParseFloat(v, 64)
		case "ckptjitter":
			p.ckptJitter, err = strconv.ParseFloat(v, 64)
		case "users":
			p.users, err = strconv.Atoi(v)
		case "userspread":
			p.userSpread, err = strconv.ParseFloat(v, 64)
		case "est":
			switch v {
			case estModel, estNone, estHours, estExact:
				p.est = v
			default:
				return p, fmt.Errorf("%s: est=%q: want model, none, hours or exact", spec, v)
			}
		case "ckpt", "restart":
			var d time.Duration
			if d, err = time.ParseDuration(v); err == nil && d < 0 {
				err = fmt.Errorf("negative")
			}
			if err != nil {
				return p, fmt.Errorf("%s: %s=%q is not a duration (e.g. 30m)", spec, k, v)
			}
			if k == "ckpt" {
				p.ckpt = d
			} else {
				p.restart = d
			}
		default:
			return p, fmt.Errorf("%s: unknown parameter %q (known: jobs, load, seed, late, ckpt, restart, est, declared, ckptspread, ckptjitter, users, userspread)", spec, k)
		}
		if err != nil {
			return p, fmt.Errorf("%s: %s=%q is not a number", spec, k, v)
		}
	}
	if p.jobs <= 0 || p.jobs > 1_000_000 {
		return p, fmt.Errorf("%s: jobs=%d: want 1..1000000", spec, p.jobs)
	}
	if p.users < 0 || p.users > 10_000 {
		return p, fmt.Errorf("%s: users=%d: want 0..10000 users per queue (0: none)", spec, p.users)
	}
	if !(p.userSpread > 0 && p.userSpread <= 100) {
		return p, fmt.Errorf("%s: userspread=%g: want a standard deviation of ln(runtime) in (0, 100]", spec, p.userSpread)
	}
	if !(p.late >= 0 && p.late < 1) {
		return p, fmt.Errorf("%s: late=%g: want a share of the span in [0, 1)", spec, p.late)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"declared", p.declared}, {"ckptspread", p.ckptSpread}, {"ckptjitter", p.ckptJitter}} {
		if !(f.v >= 0 && f.v <= 1) {
			return p, fmt.Errorf("%s: %s=%g: want a share in [0, 1]", spec, f.name, f.v)
		}
	}
	if !(p.load > 0 && p.load <= 100) {
		return p, fmt.Errorf("%s: load=%g: want a share of GPU capacity above 0 (0.9 = 90%%)", spec, p.load)
	}
	return p, nil
}

// generate runs a generator named by spec.
func generate(spec string, opt Options) (*Trace, error) {
	p, err := parseGen(spec, opt)
	if err != nil {
		return nil, err
	}
	if opt.Cluster == nil {
		return nil, fmt.Errorf("%s: the generator sizes jobs to a cluster: give one", spec)
	}
	if strings.HasPrefix(spec, "gen:mig") {
		return genMIG(p, opt.Cluster)
	}
	runtimes, err := philly()
	if err != nil {
		return nil, err
	}
	return genLLM(p, opt.Cluster, runtimes)
}

// genLLM draws the LLM-era gang mix. Every random draw comes from one PCG
// stream seeded with p.seed, in a fixed order, so one seed is one trace.
func genLLM(p genParams, c *ClusterSpec, runtimes []time.Duration) (*Trace, error) {
	shape, err := llmShapeFor(c)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(uint64(p.seed), 0x636f7272616c)) // "corral"
	t := &Trace{Name: fmt.Sprintf("gen:llm?jobs=%d&load=%g&seed=%d", p.jobs, p.load, p.seed)}
	if p.late > 0 {
		t.Name += fmt.Sprintf("&late=%g", p.late)
	}
	if p.ckpt > 0 {
		t.Name += "&ckpt=" + p.ckpt.String()
	}
	if p.restart > 0 {
		t.Name += "&restart=" + p.restart.String()
	}
	if p.est != estModel {
		t.Name += "&est=" + p.est
	}
	if p.declared != defaultDeclared {
		t.Name += fmt.Sprintf("&declared=%g", p.declared)
	}
	if p.ckptSpread != defaultCkptSpread || p.ckptJitter != defaultCkptJitter {
		t.Name += fmt.Sprintf("&ckptspread=%g&ckptjitter=%g", p.ckptSpread, p.ckptJitter)
	}
	if p.users != defaultUsers || p.userSpread != defaultUserSpread {
		t.Name += fmt.Sprintf("&users=%d&userspread=%g", p.users, p.userSpread)
	}
	// What users declare and how jobs really checkpoint come from a second
	// stream with a fixed number of draws per job, so that every est and
	// ckpt setting gives the same jobs, sizes, runtimes and arrivals.
	info := rand.New(rand.NewPCG(uint64(p.seed), 0x696e666f)) // "info"
	users := newUserModel(p.seed, llmQueues, p.users, p.userSpread, runtimes)

	var work float64 // GPU-seconds offered
	for i := 0; i < p.jobs; i++ {
		size := shape.sizes.draw(rng)
		runtime := runtimes[rng.IntN(len(runtimes))]
		j := &workload.Job{
			ID:          workload.JobID(fmt.Sprintf("llm-%05d", i)),
			Queue:       llmQueues[rng.IntN(len(llmQueues))],
			Preemptible: true,
			Source:      fmt.Sprintf("%s:%d", t.Name, i),
		}
		if users != nil {
			j.User = users.user(j.Queue, runtime)
		}
		declares, accuracy, spread, _ := info.Float64(), info.Float64(), info.Float64(), info.Float64()
		switch p.est {
		case estModel:
			if declares < p.declared {
				j.ExpectedRuntime = estimate(runtime, accuracy)
			}
		case estHours:
			j.ExpectedRuntime = (runtime + time.Hour - 1).Truncate(time.Hour)
		case estExact:
			j.ExpectedRuntime = runtime
		}
		if rng.Float64() < highPriority {
			j.Priority, j.Preemptible = 100, false
		}
		shape.podSets(j, size)
		if p.ckpt > 0 {
			j.CheckpointInterval = p.ckpt
		}
		j.RestartOverhead = p.restart
		work += float64(size) * runtime.Seconds()
		tj := Job{Job: j, Runtime: runtime}
		if ci := j.CheckpointInterval; ci > 0 && (p.ckptSpread > 0 || p.ckptJitter > 0) {
			tj.CheckpointEvery = time.Duration(float64(ci) * (1 + p.ckptSpread*(2*spread-1)))
			tj.CheckpointJitter = p.ckptJitter
		}
		t.Jobs = append(t.Jobs, tj)
	}
	// Poisson arrivals at the rate that offers p.load of the GPU capacity:
	// given n arrivals over a span T, a Poisson process puts them uniformly in
	// [0, T). Choosing T = work / (load x GPUs) makes the offered load exact
	// for the drawn jobs instead of only in expectation.
	span := work / (p.load * float64(shape.capacity))
	at := make([]float64, p.jobs)
	for i := range at {
		at[i] = rng.Float64() * span
	}
	slices.Sort(at)
	last := llmQueues[len(llmQueues)-1]
	for i := range t.Jobs {
		sec := at[i]
		if p.late > 0 && t.Jobs[i].Queue == last {
			// The same jobs, squeezed into the late window: no extra draws,
			// so the other queues' jobs are exactly those of late=0.
			sec = p.late*span + sec*(1-p.late)
		}
		t.Jobs[i].Submit = Epoch.Add(time.Duration(sec) * time.Second)
	}
	return t, nil
}

// llmShape is what the generator derives from the cluster.
type llmShape struct {
	capacity  int // GPUs in the cluster
	podGPUs   int // GPUs per pod of a multi-node job: a power of two that fills a node
	cpuPerGPU int64
	memPerGPU int64
	sizes     sizeDist
	// required is the narrowest level above the host, and fits the GPUs of
	// its median domain; preferred is that level's parent.
	required, preferred string
	fits                int
}

func llmShapeFor(c *ClusterSpec) (*llmShape, error) {
	s := &llmShape{capacity: c.GPUs()}
	if s.capacity == 0 {
		return nil, fmt.Errorf("gen:llm: cluster %s has no GPUs", c.Name)
	}
	// The reference node is the first with the most GPUs: pods are sized to
	// a power-of-two share of it, CPU and memory in proportion.
	ref := &c.Nodes[0]
	for i := range c.Nodes {
		if len(c.Nodes[i].Devices) > len(ref.Devices) {
			ref = &c.Nodes[i]
		}
	}
	s.podGPUs = floorPow2(len(ref.Devices))
	s.cpuPerGPU = ref.CPUMilli / int64(len(ref.Devices))
	s.memPerGPU = ref.MemMiB / int64(len(ref.Devices))
	big := 0 // nodes that can hold a full pod
	for i := range c.Nodes {
		if len(c.Nodes[i].Devices) >= s.podGPUs {
			big++
		}
	}
	maxSize := min(kalosMaxGPUs, floorPow2(max(s.podGPUs, big*s.podGPUs)))
	// A cluster too small for Kalos' mean keeps its heavy tail at a quarter
	// of the largest job instead of making nearly every job cluster-sized.
	s.sizes = powerOfTwoSizes(maxSize, min(kalosMeanGPUs, float64(maxSize)/4))

	if levels := c.Topology.Levels; len(levels) > 0 {
		narrow := levels[len(levels)-1]
		s.required = narrow.Name
		if len(levels) > 1 {
			s.preferred = levels[len(levels)-2].Name
		}
		perDomain := map[string]int{}
		for i := range c.Nodes {
			perDomain[c.Nodes[i].Labels[narrow.Label]] += len(c.Nodes[i].Devices)
		}
		caps := make([]int, 0, len(perDomain))
		for _, n := range perDomain {
			caps = append(caps, n)
		}
		slices.Sort(caps)
		s.fits = caps[(len(caps)-1)/2] // the lower median
	}
	return s, nil
}

// podSets shapes a job of size GPUs: one pod up to a node, else a strict gang
// of full-node pods. A multi-node job must stay in one narrowest domain when
// a typical one can hold it, else it prefers one domain of the level above.
func (s *llmShape) podSets(j *workload.Job, size int) {
	per := min(size, s.podGPUs)
	pods := size / per
	j.PodSets = []workload.PodSet{{Name: "workers", Count: pods, Request: workload.Request{
		CPUMilli: s.cpuPerGPU * int64(per), MemMiB: s.memPerGPU * int64(per), GPUs: per,
	}}}
	if pods == 1 {
		return
	}
	j.MinMembers = pods
	j.CheckpointInterval = llmCheckpoint
	switch {
	case s.required != "" && size <= s.fits:
		j.Topology.Required = s.required
	case s.preferred != "":
		j.Topology.Preferred = s.preferred
	}
}

// philly reads the embedded Philly runtimes, zeros dropped, capped at a week,
// in whole seconds (at least one).
func philly() ([]time.Duration, error) {
	const file = "philly/philly_runtime.csv"
	f, err := data.FS.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readRuntimes(f, "data/"+file)
}

func readRuntimes(r io.Reader, name string) ([]time.Duration, error) {
	f, err := openCSV(r, name, []string{"runtime"}, nil)
	if err != nil {
		return nil, err
	}
	var out []time.Duration
	for {
		ok, err := f.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		v, err := strconv.ParseFloat(f.str("runtime"), 64)
		if err != nil || math.IsNaN(v) || v < 0 {
			return nil, f.errAt("runtime", "malformed runtime %q", f.str("runtime"))
		}
		if v == 0 {
			continue // jobs that never ran say nothing about run time
		}
		d := time.Duration(math.Ceil(min(v, maxRuntime.Seconds()))) * time.Second
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, errorf(name, 0, "", "no positive runtimes")
	}
	return out, nil
}
