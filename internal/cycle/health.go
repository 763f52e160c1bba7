package cycle

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Failure is one failed device, or a whole failed node, as a driver saw it.
// The device's capacity is already out of the cluster.State (drivers call
// SetDeviceHealth); the record adds what the state cannot: since when and
// why, for WaitForRepair's limit and for messages. A failed node is also
// marked unschedulable by the driver.
type Failure struct {
	Node string
	// Device is the device id; empty means the whole node failed (NotReady,
	// unreachable, or a fault that takes every device).
	Device string
	Since  time.Time
	// Reason is one short phrase for events, e.g. "XID 79" or "NotReady".
	Reason string
}

func (f Failure) String() string {
	what := "node " + f.Node
	if f.Device != "" {
		what = fmt.Sprintf("device %s on node %s", f.Device, f.Node)
	}
	if f.Reason != "" {
		what += " (" + f.Reason + ")"
	}
	return what
}

// Spare is capacity held back in a topology domain for replacing failed
// ranks: ordinary placement never uses it, ReplaceRanks may.
type Spare struct {
	// Level is a topology level (e.g. "rack"); Domain one domain of it, or
	// empty for every domain of the level.
	Level  string
	Domain string
	// GPUs is the number of whole GPUs held in each such domain.
	GPUs int
	// Queue, when set, keeps the spare for replacements of that queue's
	// jobs (the job's queue name, as in workload.Job.Queue); empty: any
	// job's replacements may use it.
	Queue string
}

// Suspect is a node that rejected pods at admission (for Kubernetes, pods
// failed with UnexpectedAdmissionError: a device plugin that restarted or
// lost its devices). Ordinary placement scores it last; at Limit rejections
// it is left out until Until.
type Suspect struct {
	Node       string
	Rejections int
	Until      time.Time
}

// ParseSpares reads a spare list: comma-separated items
// "level=GPUs" (GPUs held in every domain of the level), "level/domain=GPUs"
// (in that domain only), each optionally followed by "@queue" (for that
// queue's replacements only), e.g. "rack=8,cluster=16@team-a". Whether the
// levels and domains exist is checked against the cluster each cycle
// (ExpandSpares).
func ParseSpares(spec string) ([]Spare, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	var out []Spare
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		where, rest, ok := strings.Cut(item, "=")
		gpus, queue, _ := strings.Cut(rest, "@")
		n, err := strconv.Atoi(gpus)
		level, domain, _ := strings.Cut(where, "/")
		if !ok || level == "" || err != nil || n <= 0 || strings.Contains(rest, "@") && queue == "" {
			return nil, fmt.Errorf("spares: bad item %q: want level=GPUs, level/domain=GPUs, optionally @queue (e.g. rack=8, rack/r07=8, cluster=16@team-a)", item)
		}
		out = append(out, Spare{Level: level, Domain: domain, GPUs: n, Queue: queue})
	}
	return out, nil
}
