package engine

import (
	"fmt"
	"sort"
	"strings"

	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/placement"
)

// VictimWait bounds how long a job waits for the pods evicted for it.
const VictimWait = cycle.VictimWait

// LevelPreemption is the Reason level of a job waiting for the pods
// evicted for it to terminate.
const LevelPreemption = "preemption"

// awaitingVictims keeps a job pending while pods evicted for it are still
// terminating (Snapshot.Terminating), for at most VictimWait: the room is
// coming, and neither placing it elsewhere nor evicting more would help.
func (c *run) awaitingVictims(pj PendingJob) (Reason, bool) {
	var names []string
	for _, t := range c.s.Terminating {
		if t.For == pj.Job.ID && c.s.Now.Sub(t.Since) < VictimWait {
			names = append(names, t.Name)
		}
	}
	if len(names) == 0 {
		return Reason{}, false
	}
	sort.Strings(names)
	return Reason{Verdict: placement.WaitFree, Level: LevelPreemption, Message: WaitingForVictims(names)}, true
}

// WaitingForVictims is the reason of a job waiting for the named pods.
func WaitingForVictims(victims []string) string {
	const show = 5
	if len(victims) > show {
		return fmt.Sprintf("waiting for %d preempted pods to terminate (%s and %d more)", len(victims),
			strings.Join(victims[:show], ", "), len(victims)-show)
	}
	return fmt.Sprintf("waiting for %d preempted pods to terminate (%s)", len(victims), strings.Join(victims, ", "))
}
