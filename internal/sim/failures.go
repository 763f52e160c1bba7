package sim

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/workload"
)

// Published failure figures the defaults derive from (Llama 3 paper, 2024,
// via /work/shared/data/README.md): 419 unexpected interruptions in 54 days
// of training on 16,384 H100 GPUs (2,048 hosts of 8), about 78% hardware,
// GPU 30% and HBM 17% of all. That is 419 / (54 × 24 × 16,384) = 1.97e-5
// interruptions per GPU-hour. The GPU and HBM share (47%) is taken as
// per-device failures; the rest (host, NIC, network, software, ...) as
// whole-node failures, per 8-GPU host.
const (
	llama3Interruptions = 419.0
	llama3GPUHours      = 54 * 24 * 16384.0
	llama3DeviceShare   = 0.47
	llama3GPUsPerHost   = 8
)

// Llama3 is the unscaled failure model: per-GPU and per-node rates from the
// published figures; repair times are this project's assumptions (the
// paper gives none): a GPU swap or reset 12 h, a node reboot or repair 2 h.
var Llama3 = FailureModel{
	DevicePerHour:   llama3DeviceShare * llama3Interruptions / llama3GPUHours,
	NodePerHour:     (1 - llama3DeviceShare) * llama3Interruptions / llama3GPUHours * llama3GPUsPerHost,
	DeviceRepair:    12 * time.Hour,
	NodeRepair:      2 * time.Hour,
	NodeDetect:      DefaultNodeDetect,
	Scale:           1,
	ReplaceOverhead: -1,
}

// DefaultNodeDetect is how long a dead node goes unnoticed: the
// kube-controller-manager's node-monitor-grace-period (50 s by default
// since Kubernetes 1.32), after which the node is NotReady.
const DefaultNodeDetect = 50 * time.Second

// KubeEvictAfter is how long Kubernetes by itself leaves the pods of a
// NotReady or unreachable node in place: the DefaultTolerationSeconds
// admission plugin gives every pod a 300 s toleration of the
// node.kubernetes.io/not-ready and unreachable NoExecute taints, and only
// then does taint-based eviction remove them so that a Job controller can
// restart the job. corral remediates at NotReady (docs/health.md).
const KubeEvictAfter = 300 * time.Second

// FailureModel injects device and node failures into a replay.
type FailureModel struct {
	// DevicePerHour is each GPU's failure rate; NodePerHour each node's.
	DevicePerHour, NodePerHour float64
	// DeviceRepair and NodeRepair is how long a failed device or node stays
	// out before it comes back; a node's repair starts when it is acted on.
	DeviceRepair, NodeRepair time.Duration
	// NodeDetect is the time from a node's death to its NotReady, and
	// EvictAfter the time from NotReady to the removal of its pods (0 for
	// corral, KubeEvictAfter for what Kubernetes does by itself). The
	// scheduler learns of a node failure after both; a device failure is
	// reported at once by the node's health agent. Meanwhile a gang that
	// lost a rank is hung: it holds its GPUs and makes no progress.
	NodeDetect, EvictAfter time.Duration
	// Scale multiplies both rates, so that a short run sees enough failures.
	Scale float64
	// RestartOverhead is given to jobs that declare none: the time a
	// restarted job spends before it makes progress again.
	RestartOverhead time.Duration
	// ReplaceOverhead is the overhead of a gang resumed after ReplaceRanks:
	// its healthy ranks keep their pods (no rescheduling, no image pull) and
	// only restart their processes from the checkpoint, while the new rank
	// starts on a node that already has the image (a warm spare). Negative:
	// the same as a whole restart.
	ReplaceOverhead time.Duration
	// Remediation, when set, replaces every job's own policy.
	Remediation workload.Remediation
	// Spares is capacity held for replacing failed ranks (corral only).
	Spares []cycle.Spare
}

// ParseFailures reads "llama3", "llama3,scale=200,overhead=5m" or explicit
// rates "device=1e-5,node=8e-5,device-repair=12h,node-repair=2h". Keys:
// device, node (failures per hour per GPU and per node), device-repair,
// node-repair, scale, overhead (a whole restart's, for jobs declaring
// none), replace-overhead (a gang resumed after ReplaceRanks; default: the
// same as a whole restart), node-detect (default 50s), evict-after
// (default 0; "kube" is Kubernetes' own 300s).
func ParseFailures(spec string) (*FailureModel, error) {
	if spec == "" || spec == "off" {
		return nil, nil
	}
	m := Llama3
	for _, kv := range strings.Split(spec, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "llama3" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("failures: bad item %q: want llama3 or key=value (device, node, device-repair, node-repair, scale, overhead, replace-overhead, node-detect, evict-after)", kv)
		}
		var err error
		switch k {
		case "device", "node", "scale":
			var f float64
			f, err = strconv.ParseFloat(v, 64)
			if err == nil && (f < 0 || math.IsNaN(f) || math.IsInf(f, 0)) {
				err = fmt.Errorf("must be a non-negative number")
			}
			switch k {
			case "device":
				m.DevicePerHour = f
			case "node":
				m.NodePerHour = f
			default:
				m.Scale = f
			}
		case "device-repair", "node-repair", "overhead", "replace-overhead", "node-detect", "evict-after":
			var d time.Duration
			if k == "evict-after" && v == "kube" {
				d = KubeEvictAfter
			} else {
				d, err = time.ParseDuration(v)
			}
			if err == nil && d < 0 {
				err = fmt.Errorf("must not be negative")
			}
			switch k {
			case "device-repair":
				m.DeviceRepair = d
			case "node-repair":
				m.NodeRepair = d
			case "replace-overhead":
				m.ReplaceOverhead = d
			case "node-detect":
				m.NodeDetect = d
			case "evict-after":
				m.EvictAfter = d
			default:
				m.RestartOverhead = d
			}
		default:
			err = fmt.Errorf("unknown key")
		}
		if err != nil {
			return nil, fmt.Errorf("failures: %s=%s: %v", k, v, err)
		}
	}
	return &m, nil
}

// injector draws failures as one Poisson process over every GPU and node.
type injector struct {
	m       FailureModel
	rng     *rand.Rand
	devices [][2]int // (node, device) of every GPU
	nodes   int
	rate    float64 // total failures per hour
	active  bool    // a next failure is scheduled
	failed  map[[2]int]cycle.Failure
	// seenAt is when the scheduler learns of each failure (node failures
	// go unnoticed for NodeDetect + EvictAfter).
	seenAt  map[[2]int]time.Time
	repairs int // repairs outstanding
}

func newInjector(s *cluster.State, m FailureModel, seed int64) *injector {
	in := &injector{m: m, rng: rand.New(rand.NewPCG(uint64(seed), 0x6661696c)), // "fail"
		nodes: s.NumNodes(), failed: map[[2]int]cycle.Failure{}, seenAt: map[[2]int]time.Time{}}
	for n := 0; n < s.NumNodes(); n++ {
		for k := range s.Node(n).Devices {
			in.devices = append(in.devices, [2]int{n, k})
		}
	}
	in.rate = m.Scale * (m.DevicePerHour*float64(len(in.devices)) + m.NodePerHour*float64(in.nodes))
	return in
}

// next is the time to the next failure.
func (in *injector) next() time.Duration {
	return time.Duration(in.rng.ExpFloat64() / in.rate * float64(time.Hour))
}

// draw picks what fails: a device (dev >= 0) or a whole node (dev -1).
func (in *injector) draw() (node, dev int) {
	devRate := in.m.DevicePerHour * float64(len(in.devices))
	if in.rng.Float64()*(devRate+in.m.NodePerHour*float64(in.nodes)) < devRate {
		d := in.devices[in.rng.IntN(len(in.devices))]
		return d[0], d[1]
	}
	return in.rng.IntN(in.nodes), -1
}

// records lists what is failed and known to the scheduler at now, in node
// and device order.
func (in *injector) records(now time.Time) []cycle.Failure {
	keys := make([][2]int, 0, len(in.failed))
	for k := range in.failed {
		if !in.seenAt[k].After(now) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	out := make([]cycle.Failure, len(keys))
	for i, k := range keys {
		out[i] = in.failed[k]
	}
	return out
}

// withFailurePolicy copies the jobs that the model changes: the restart
// overhead for jobs declaring none, and the remediation override.
func withFailurePolicy(jobs []Job, m FailureModel) []Job {
	if m.RestartOverhead == 0 && m.Remediation == "" {
		return jobs
	}
	out := make([]Job, len(jobs))
	for i, j := range jobs {
		c := *j.Job
		if c.RestartOverhead == 0 {
			c.RestartOverhead = m.RestartOverhead
		}
		if m.Remediation != "" {
			c.Remediation = m.Remediation
		}
		out[i] = j
		out[i].Job = &c
	}
	return out
}

func (r *replay) pushFailure(at time.Time) {
	heap.Push(&r.events, event{at: at, kind: evFail, seq: r.seq, dev: -1})
	r.seq++
}

// injectFailure fails one device or node, schedules its repair and draws
// the next failure while any work remains that a failure could hit.
func (r *replay) injectFailure(now time.Time) {
	in := r.inj
	n, k := in.draw()
	key := [2]int{n, k}
	_, nodeDown := in.failed[[2]int{n, -1}]
	if _, down := in.failed[key]; !down && !nodeDown {
		f := cycle.Failure{Node: r.state.Node(n).Name, Since: now}
		seen, repairAt := now, now.Add(in.m.DeviceRepair)
		if k >= 0 {
			f.Device, f.Reason = r.state.Node(n).Devices[k].ID, "injected device failure"
			r.state.SetDeviceHealth(n, k, false)
		} else {
			f.Reason = "injected node failure"
			// Nothing new lands on it from now (a simplification: a real
			// scheduler keeps placing there until NotReady).
			r.state.SetSchedulable(n, false)
			seen = now.Add(in.m.NodeDetect + in.m.EvictAfter)
			repairAt = seen.Add(in.m.NodeRepair)
		}
		in.failed[key] = f
		in.seenAt[key] = seen
		in.repairs++
		r.res.Summary.Failures++
		r.hang(n, k, now)
		if seen.After(now) {
			heap.Push(&r.events, event{at: seen, kind: evDetect, seq: r.seq, dev: -1})
			r.seq++
		}
		heap.Push(&r.events, event{at: repairAt, kind: evRepair, seq: r.seq, node: n, dev: k})
		r.seq++
	}
	in.active = false
	// Failures stop while nothing runs (pending repairs still happen), and
	// when nothing but failures and repairs is ahead: jobs with no runtime
	// run forever, and failing them forever would never end the run. The
	// next start resumes them, so a run always ends.
	if len(r.running) > 0 && r.workAhead() {
		in.active = true
		r.pushFailure(now.Add(in.next()))
	}
}

// repair brings a device or node back. A pod still holding a repaired
// device (a job waiting for repair) takes its share again.
func (r *replay) repair(n, k int, now time.Time) {
	in := r.inj
	delete(in.failed, [2]int{n, k})
	delete(in.seenAt, [2]int{n, k})
	in.repairs--
	r.resumeRepaired(n, k, now)
	if k < 0 {
		r.state.SetSchedulable(n, true)
		return
	}
	r.state.SetDeviceHealth(n, k, true)
	for _, jr := range r.jobs {
		if jr.finished {
			continue // a finished job's pods gave everything back
		}
		for _, b := range jr.bound {
			if b.NodeIndex != n {
				continue
			}
			for _, d := range b.Alloc.Devices {
				if d.Device == k {
					_ = r.state.Allocate(n, cluster.Alloc{Devices: []cluster.DeviceShare{d}})
				}
			}
		}
	}
}

// hang stops the progress of every running gang that the failure of node
// n (k < 0) or of its device k leaves below its gang minimum: its ranks
// there crashed or hang, and the rest wait in a collective. It holds its
// GPUs until the scheduler acts (remediation) or the failure is repaired.
func (r *replay) hang(n, k int, now time.Time) {
	for _, i := range r.running {
		jr := r.jobs[i]
		if !jr.hungAt.IsZero() {
			continue
		}
		broken := 0
		for _, b := range jr.bound {
			if b.NodeIndex == n && (k < 0 || holdsDevice(b.Alloc, k)) {
				broken++
			}
		}
		if broken == 0 || len(jr.bound)-broken >= jr.job.GangMin() {
			continue
		}
		jr.hungAt = now
		for _, b := range jr.bound {
			r.useful -= b.Alloc.GPUMilli()
		}
		jr.epoch++ // the run's end and max-runtime wake no longer hold
	}
}

func holdsDevice(a cluster.Alloc, k int) bool {
	for _, d := range a.Devices {
		if d.Device == k {
			return true
		}
	}
	return false
}

// unhang ends a job's hang when it is evicted: the GPU time it held hung is
// a failure's cost of its own, returned so that the caller does not count
// it as rolled-back work as well.
func (r *replay) unhang(jr *jobRun, now time.Time) time.Duration {
	if jr.hungAt.IsZero() {
		return 0
	}
	hung := max(0, now.Sub(jr.hungAt))
	r.fail.hung += jr.job.GPUs() * hung.Seconds()
	jr.hungAt = time.Time{}
	return hung
}

// resumeRepaired restarts in place the hung gangs that waited for what was
// just repaired (WaitForRepair, or a repair quicker than the scheduler): if
// nothing else they hold is still failed, their processes reload the last
// checkpoint on the same pods.
func (r *replay) resumeRepaired(n, k int, now time.Time) {
	for _, i := range r.running {
		jr := r.jobs[i]
		if jr.hungAt.IsZero() || !r.holdsOnly(jr, n, k) {
			continue
		}
		saved, lost := r.progress(jr, now)
		failedAt := jr.hungAt
		hung := r.unhang(jr, now)
		jr.workDone += saved
		r.res.Summary.GPUHoursLost += jr.job.GPUs() * lost.Hours()
		r.fail.lostWork += r.failureLoss(jr, lost-hung)
		r.res.Summary.JobsRestarted++
		jr.restarts++
		jr.epoch++
		jr.start, jr.failedAt = now, failedAt
		r.recovered(jr, now)
		jr.runOverhead = jr.job.RestartOverhead
		r.fail.overhead += jr.job.GPUs() * jr.runOverhead.Seconds()
		jr.overheadCounted = true
		for _, b := range jr.bound {
			r.useful += b.Alloc.GPUMilli()
		}
		jr.frac, jr.segDone, jr.segStart = podShare(jr), 0, now.Add(jr.runOverhead)
		r.scheduleFinish(jr)
		if mr := jr.job.MaxRuntime; mr > 0 {
			r.push(now.Add(mr), evWake, i)
		}
		r.restartInjector(now)
	}
}

// holdsOnly reports whether the job has pods on node n's device k (or on
// node n, k < 0) and on no other failed node or device.
func (r *replay) holdsOnly(jr *jobRun, n, k int) bool {
	hit := false
	for _, b := range jr.bound {
		if _, down := r.inj.failed[[2]int{b.NodeIndex, -1}]; down {
			return false
		}
		for _, d := range b.Alloc.Devices {
			if _, down := r.inj.failed[[2]int{b.NodeIndex, d.Device}]; down {
				return false
			}
		}
		if b.NodeIndex == n && (k < 0 || holdsDevice(b.Alloc, k)) {
			hit = true
		}
	}
	return hit
}

// restartInjector resumes the failure process when work arrives after it
// stopped for lack of anything to hit.
func (r *replay) restartInjector(now time.Time) {
	if r.inj != nil && !r.inj.active && r.inj.rate > 0 && r.workAhead() {
		r.inj.active = true
		r.pushFailure(now.Add(r.inj.next()))
	}
}

// workAhead reports whether an event other than the failure process's own
// is still to come: an arrival, the end or max-runtime wake of a current
// run, a retry. Without one, the run is over but for jobs that never end.
func (r *replay) workAhead() bool {
	for _, e := range r.events {
		switch e.kind {
		case evFail, evRepair, evDetect:
		case evFinish, evWake:
			if jr := r.jobs[e.job]; e.epoch == jr.epoch && !jr.finished {
				return true
			}
		default:
			return true
		}
	}
	return false
}

// recovered records the time from a failure to the job running whole again.
func (r *replay) recovered(jr *jobRun, now time.Time) {
	if jr.failedAt.IsZero() || (jr.started && len(jr.bound) < jr.job.Pods()) {
		return
	}
	r.fail.recoveries = append(r.fail.recoveries, now.Sub(jr.failedAt).Seconds())
	jr.failedAt = time.Time{}
}

// failureLoss is the GPU-seconds a failure rolled back, less restart
// overhead already counted when the run began.
func (r *replay) failureLoss(jr *jobRun, lost time.Duration) float64 {
	if jr.overheadCounted {
		lost -= min(lost, jr.runOverhead)
	}
	return jr.job.GPUs() * lost.Seconds()
}

func (r *replay) isPending(i int) bool {
	for _, p := range r.pending {
		if p == i {
			return true
		}
	}
	return false
}

// summariseFailures fills the failure figures: goodput is the work of the
// jobs that completed (GPUs × runtime) over the GPU time allocated.
func (r *replay) summariseFailures() {
	s := &r.res.Summary
	if r.fail.allocArea > 0 {
		var work float64
		for _, jr := range r.jobs {
			if jr.finished {
				work += jr.job.GPUs() * jr.job.Runtime.Seconds()
			}
		}
		s.GoodputPct = 100 * work / (r.fail.allocArea / workload.MilliPerGPU)
		s.WorkGPUHours = work / 3600
	}
	if r.inj == nil {
		return
	}
	s.FailureLostGPUHours = (r.fail.lostWork + r.fail.overhead + r.fail.idleHeld + r.fail.hung) / 3600
	s.FailureHungGPUHours = r.fail.hung / 3600
	s.FailureRollbackGPUHours = r.fail.lostWork / 3600
	s.FailureIdleGPUHours = r.fail.idleHeld / 3600
	s.FailureOverheadGPUHours = r.fail.overhead / 3600
	rec := append([]float64(nil), r.fail.recoveries...)
	s.Recoveries = len(rec)
	_, s.RecoveryP95S, _, s.RecoveryMeanS = quantiles(rec)
}
