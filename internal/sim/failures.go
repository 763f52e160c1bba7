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
	"github.com/corral-dev/corral/internal/health"
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
	Scale:           1,
	ReplaceOverhead: -1,
}

// FailureModel injects device and node failures into a replay.
type FailureModel struct {
	// DevicePerHour is each GPU's failure rate; NodePerHour each node's.
	DevicePerHour, NodePerHour float64
	// DeviceRepair and NodeRepair is how long a failed device or node stays
	// out before it comes back.
	DeviceRepair, NodeRepair time.Duration
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
	Spares []health.Spare
}

// ParseFailures reads "llama3", "llama3,scale=200,overhead=5m" or explicit
// rates "device=1e-5,node=8e-5,device-repair=12h,node-repair=2h". Keys:
// device, node (failures per hour per GPU and per node), device-repair,
// node-repair, scale, overhead (a whole restart's, for jobs declaring
// none), replace-overhead (a gang resumed after ReplaceRanks; default: the
// same as a whole restart).
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
			return nil, fmt.Errorf("failures: bad item %q: want llama3 or key=value (device, node, device-repair, node-repair, scale, overhead, replace-overhead)", kv)
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
		case "device-repair", "node-repair", "overhead", "replace-overhead":
			var d time.Duration
			d, err = time.ParseDuration(v)
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

// ParseSpares reads "rack=8" or "rack=8,block=16": GPUs held in every
// domain of each level.
func ParseSpares(spec string) ([]health.Spare, error) {
	if spec == "" {
		return nil, nil
	}
	var out []health.Spare
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		n, err := strconv.Atoi(v)
		if !ok || k == "" || err != nil || n <= 0 {
			return nil, fmt.Errorf("spares: bad item %q: want level=GPUs, e.g. rack=8", kv)
		}
		out = append(out, health.Spare{Level: k, GPUs: n})
	}
	return out, nil
}

// injector draws failures as one Poisson process over every GPU and node.
type injector struct {
	m       FailureModel
	rng     *rand.Rand
	devices [][2]int // (node, device) of every GPU
	nodes   int
	rate    float64 // total failures per hour
	active  bool    // a next failure is scheduled
	failed  map[[2]int]health.Failure
	repairs int // repairs outstanding
}

func newInjector(s *cluster.State, m FailureModel, seed int64) *injector {
	in := &injector{m: m, rng: rand.New(rand.NewPCG(uint64(seed), 0x6661696c)), // "fail"
		nodes: s.NumNodes(), failed: map[[2]int]health.Failure{}}
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

// records lists what is failed now, in node and device order.
func (in *injector) records() []health.Failure {
	keys := make([][2]int, 0, len(in.failed))
	for k := range in.failed {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	out := make([]health.Failure, len(keys))
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
		out[i] = Job{Job: &c, Runtime: j.Runtime}
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
		f := health.Failure{Node: r.state.Node(n).Name, Since: now}
		repairIn := in.m.NodeRepair
		if k >= 0 {
			f.Device, f.Reason = r.state.Node(n).Devices[k].ID, "injected device failure"
			repairIn = in.m.DeviceRepair
			r.state.SetDeviceHealth(n, k, false)
		} else {
			f.Reason = "injected node failure"
			r.state.SetSchedulable(n, false)
		}
		in.failed[key] = f
		in.repairs++
		r.res.Summary.Failures++
		heap.Push(&r.events, event{at: now.Add(repairIn), kind: evRepair, seq: r.seq, node: n, dev: k})
		r.seq++
	}
	in.active = false
	// Failures stop while nothing runs (pending repairs still happen); the
	// next start resumes them, so a run always ends.
	if len(r.running) > 0 {
		in.active = true
		r.pushFailure(now.Add(in.next()))
	}
}

// repair brings a device or node back. A pod still holding a repaired
// device (a job waiting for repair) takes its share again.
func (r *replay) repair(n, k int) {
	in := r.inj
	delete(in.failed, [2]int{n, k})
	in.repairs--
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

// restartInjector resumes the failure process when work arrives after it
// stopped for lack of anything to hit.
func (r *replay) restartInjector(now time.Time) {
	if r.inj != nil && !r.inj.active && r.inj.rate > 0 {
		r.inj.active = true
		r.pushFailure(now.Add(r.inj.next()))
	}
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
	s.FailureLostGPUHours = (r.fail.lostWork + r.fail.overhead + r.fail.idleHeld) / 3600
	s.FailureRollbackGPUHours = r.fail.lostWork / 3600
	s.FailureIdleGPUHours = r.fail.idleHeld / 3600
	s.FailureOverheadGPUHours = r.fail.overhead / 3600
	rec := append([]float64(nil), r.fail.recoveries...)
	s.Recoveries = len(rec)
	_, s.RecoveryP95S, _, s.RecoveryMeanS = quantiles(rec)
}
