package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

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
