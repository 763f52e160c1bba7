package cluster

import "github.com/corral-dev/corral/internal/workload"

// Placed is one pod holding capacity on a node: running, or placed earlier
// in the cycle. It is the one placed-pod type: the policies share it
// (backfill's holders, preemption's units, health's running jobs), and the
// contract's PodBind is a Placed with the names a driver writes, so a pod
// moves between them without conversion.
type Placed struct {
	Pod       workload.PodRef
	NodeIndex int // node index in the State
	Alloc     Alloc
}
