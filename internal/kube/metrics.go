package kube

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corral-dev/corral/internal/version"
)

type metrics struct {
	cycleSeconds prometheus.Histogram
	pendingJobs  prometheus.Gauge
	pendingPods  prometheus.Gauge
	podsBound    prometheus.Counter
	bindErrors   prometheus.Counter
	cyclePanics  prometheus.Counter
	fencedCycles prometheus.Counter
	// historyRuns and historySaveErrors: the runtime history (historystore.go).
	historyRuns       prometheus.Gauge
	historySaveErrors prometheus.Counter
	// estimateConfidence: how far each kind of runtime estimate has come
	// true (cycle.History.Confidence), by source.
	estimateConfidence *prometheus.GaugeVec
	binds              *bindMetrics
	queue              *queueMetrics
	ops                *opsMetrics
}

// newMetrics makes the scheduler's metrics and registers them on reg (nil:
// not registered); start is when the scheduler started (opsmetrics.go).
func newMetrics(reg prometheus.Registerer, start time.Time) *metrics {
	m := &metrics{
		cycleSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "corral_cycle_duration_seconds",
			Help: "Time of one scheduling cycle (snapshot, engine, bindings).", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		pendingJobs: prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_pending_jobs", Help: "Jobs with pods waiting for a node."}),
		pendingPods: prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_pending_pods", Help: "Pods waiting for a node."}),
		podsBound:   prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_pods_bound_total", Help: "Pods bound."}),
		bindErrors:  prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_binding_errors_total", Help: "Gangs whose binding failed part-way."}),
		cyclePanics: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_cycle_panics_total", Help: "Cycles that panicked (a bug: see the log)."}),
		fencedCycles: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_fenced_cycles_total",
			Help: "Cycles stopped before a batch of writes because the Lease was not provably held."}),
		historyRuns: prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_runtime_history_runs",
			Help: "Completed runs the runtime estimates have learned from (stored ones replayed at start included)."}),
		estimateConfidence: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "corral_runtime_estimate_confidence",
			Help: "How far runtime estimates have come true, by source (declared, learned): the mean of min(actual, estimate) / max(actual, estimate) over the last 200 completed runs."},
			[]string{"source"}),
		historySaveErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_runtime_history_save_errors_total",
			Help: "Failed writes of the runtime history ConfigMap."}),
		binds: newBindMetrics(),
		queue: newQueueMetrics(),
		ops:   newOpsMetrics(start),
	}
	m.ops.setBuildInfo(version.Get())
	if reg != nil {
		reg.MustRegister(m.cycleSeconds, m.pendingJobs, m.pendingPods, m.podsBound, m.bindErrors, m.cyclePanics, m.fencedCycles, m.historyRuns, m.historySaveErrors, m.estimateConfidence)
		reg.MustRegister(m.binds.collectors()...)
		reg.MustRegister(m.queue.collectors()...)
		reg.MustRegister(m.ops.collectors()...)
	}
	return m
}
