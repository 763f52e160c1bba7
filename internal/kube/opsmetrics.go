package kube

import (
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/placement"
	"github.com/corral-dev/corral/internal/version"
	"github.com/corral-dev/corral/internal/workload"
)

// Pending reasons of corral_pending_jobs_by_reason beside the engine's
// verdicts (WaitFree, WaitQuota, NeverFits, Refused): what the adapter
// decides before a job reaches the engine.
const (
	pendingInvalid        = "Invalid"
	pendingGangIncomplete = "GangIncomplete"
	pendingPreempting     = "Preempting"
)

// fragmentSizes are the pod sizes (GPUs on one node) corral_fragmented_gpus
// is reported for: the shapes training jobs ask for.
var fragmentSizes = []int{1, 2, 4, 8}

// opsMetrics are the figures an operator watches beside the queue gauges:
// how long jobs wait, why they wait, how much of the fleet is held and how
// much of that runs, and how scattered the free GPUs are. They are read
// from the cycle's world and plan, never from the scheduling path, so that
// they cost one pass over the snapshot per cycle.
type opsMetrics struct {
	buildInfo    *prometheus.GaugeVec
	waitSeconds  *prometheus.HistogramVec
	pendingByWhy *prometheus.GaugeVec
	gpus         *prometheus.GaugeVec
	fragmented   *prometheus.GaugeVec

	// observed holds the jobs whose wait is already in the histogram, by
	// job key, so that a job is counted once when its gang starts. Keys of
	// jobs that are gone are dropped each cycle.
	observed map[string]bool
	// since: jobs that started before the scheduler did are not observed,
	// so a new leader does not count the whole running fleet again.
	since time.Time
}

func newOpsMetrics(since time.Time) *opsMetrics {
	return &opsMetrics{
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "corral_build_info",
			Help: "Always 1; the labels say which corral runs (version, revision, Go version)."},
			[]string{"version", "revision", "goversion"}),
		waitSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "corral_job_wait_seconds",
			Help: "Time from a job's first pod's creation until its gang minimum was bound, by queue. " +
				"Observed once per job, when it starts.",
			// 1 s to about 9 days: interactive jobs start in seconds, big
			// gangs behind reservations wait hours or days.
			Buckets: prometheus.ExponentialBuckets(1, 3, 13)}, []string{"queue"}),
		pendingByWhy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "corral_pending_jobs_by_reason",
			Help: "Jobs waiting, by queue and reason: WaitFree (no room yet), WaitQuota (queue limit), NeverFits, " +
				"Refused (no queue admits it), Invalid, GangIncomplete (pods still missing), Preempting (victims terminating)."},
			[]string{"queue", "reason"}),
		gpus: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "corral_gpus",
			Help: "GPUs of the nodes corral schedules, by state: capacity (healthy), allocated (held by bound pods), " +
				"in_use (held by pods whose containers run), free (wholly free)."}, []string{"state"}),
		fragmented: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "corral_fragmented_gpus",
			Help: "Free GPUs a pod of pod_gpus GPUs on one node cannot use: scattered over nodes in smaller pieces " +
				"(for pod_gpus=1: GPU fractions left on partly used GPUs)."}, []string{"pod_gpus"}),
		observed: map[string]bool{},
		since:    since,
	}
}

func (m *opsMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.buildInfo, m.waitSeconds, m.pendingByWhy, m.gpus, m.fragmented}
}

// setBuildInfo records the running release once, at start.
func (m *opsMetrics) setBuildInfo(v version.Info) {
	m.buildInfo.WithLabelValues(v.Version, v.Revision, v.GoVersion).Set(1)
}

// observe updates every figure from one cycle: the world it started from,
// the plan and the jobs held back for terminating victims.
func (m *opsMetrics) observe(w *world, plan engine.Plan, held map[workload.JobID][]string) {
	m.observeStarts(w)
	m.pendingByWhy.Reset()
	for _, r := range pendingReasons(w, plan, held) {
		m.pendingByWhy.WithLabelValues(r.queue, r.reason).Set(float64(r.jobs))
	}
	if w.state != nil {
		for state, v := range gpuFigures(w) {
			m.gpus.WithLabelValues(state).Set(v)
		}
		for _, k := range fragmentSizes {
			m.fragmented.WithLabelValues(strconv.Itoa(k)).Set(fragmentedGPUs(w.state, k))
		}
	}
}

// observeStarts puts into the wait histogram every job whose gang minimum
// is bound and that it has not counted yet.
func (m *opsMetrics) observeStarts(w *world) {
	live := make(map[string]bool, len(w.jobs))
	for _, kj := range w.jobs {
		live[kj.key] = true
		if m.observed[kj.key] || kj.job == nil {
			continue
		}
		start, ok := gangStart(kj)
		if !ok {
			continue
		}
		m.observed[kj.key] = true
		if start.Before(m.since) || kj.job.Submit.IsZero() {
			continue
		}
		wait := start.Sub(kj.job.Submit)
		if wait < 0 {
			wait = 0
		}
		m.waitSeconds.WithLabelValues(kj.job.Queue).Observe(wait.Seconds())
	}
	for k := range m.observed {
		if !live[k] {
			delete(m.observed, k)
		}
	}
}

// gangStart is when the job's gang minimum was bound: the GangMin-th
// binding time of its pods. false while fewer are bound, or while a bound
// pod's binding time has not reached the informer yet.
func gangStart(kj *kjob) (time.Time, bool) {
	need := kj.job.GangMin()
	if need <= 0 || len(kj.bound) < need {
		return time.Time{}, false
	}
	var times []time.Time
	for ref := range kj.bound {
		p := kj.pods[ref]
		if p == nil {
			continue
		}
		t := boundAt(p)
		if t.IsZero() {
			return time.Time{}, false
		}
		times = append(times, t)
	}
	if len(times) < need {
		return time.Time{}, false
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	return times[need-1], true
}

type pendingCount struct {
	queue, reason string
	jobs          int
}

// pendingReasons counts the waiting jobs by queue and reason, in queue
// then reason order. It counts what the cycle's PendingJobs counts.
func pendingReasons(w *world, plan engine.Plan, held map[workload.JobID][]string) []pendingCount {
	type key struct{ queue, reason string }
	counts := map[key]int{}
	for _, p := range plan.Pending {
		q := ""
		if kj := w.byID[p.Job]; kj != nil && kj.job != nil && p.Reason.Verdict != placement.Refused {
			// A refused job's queue may not exist: no label for it, so
			// that typos do not mint series.
			q = kj.job.Queue
		}
		reason := p.Reason.Verdict.String()
		if p.Reason.Level == engine.LevelPreemption {
			reason = pendingPreempting // its victims are terminating
		}
		counts[key{q, reason}]++
	}
	for _, kj := range w.jobs {
		if !kj.pending() || kj.job == nil {
			continue
		}
		_, isHeld := held[kj.job.ID]
		switch {
		case isHeld:
			counts[key{kj.job.Queue, pendingPreempting}]++
		case kj.invalid != "":
			counts[key{kj.job.Queue, pendingInvalid}]++
		case kj.waiting != "":
			counts[key{kj.job.Queue, pendingGangIncomplete}]++
		}
	}
	keys := make([]key, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].queue != keys[j].queue {
			return keys[i].queue < keys[j].queue
		}
		return keys[i].reason < keys[j].reason
	})
	out := make([]pendingCount, len(keys))
	for i, k := range keys {
		out[i] = pendingCount{k.queue, k.reason, counts[k]}
	}
	return out
}

// gpuFigures are the fleet's GPUs by state, in GPUs (fractions count as
// their share). in_use counts pods the kubelet reports Running: bound pods
// still pulling images, or waiting in a gang for the rest of it, hold GPUs
// that do no work yet.
func gpuFigures(w *world) map[string]float64 {
	s := w.state
	capacity := float64(s.CapacityMilli()) / 1000
	out := map[string]float64{
		"capacity":  capacity,
		"allocated": capacity - float64(s.FreeMilli())/1000,
		"free":      float64(s.DomainFreeGPUs(0, cluster.AllModels)),
	}
	var inUse int64
	for _, p := range w.pods {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		if h, ok := w.holds[string(p.UID)]; ok {
			inUse += h.alloc.GPUMilli()
		}
	}
	out["in_use"] = float64(inUse) / 1000
	return out
}

// fragmentedGPUs is the free GPU capacity a pod of k GPUs (on one node, one
// model) cannot use. For k = 1 it is the free fractions of partly used GPUs,
// which no whole-GPU pod can take.
func fragmentedGPUs(s *cluster.State, k int) float64 {
	whole := s.DomainFreeGPUs(0, cluster.AllModels)
	if k <= 1 {
		return float64(s.FreeMilli()-int64(whole)*1000) / 1000
	}
	return float64(whole - k*s.FitCount(0, cluster.AllModels, k))
}
