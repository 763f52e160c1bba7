package engine

import (
	"fmt"
	"strings"
)

// warn records the problems the cycle goes past without refusing a job: a
// preferred topology level the cluster does not have. A preference is not
// a constraint, so the job is placed as if it had none (gangOf), in every
// driver alike: `corral sim` and the Kubernetes adapter see the same
// placement and the same warning.
func (c *run) warn() {
	for _, pj := range c.s.Pending {
		pref := pj.Job.Topology.Preferred
		if pref == "" || c.s.State.LevelIndex(pref) >= 0 {
			continue
		}
		c.l.plan.Warnings = append(c.l.plan.Warnings, Warning{Job: pj.Job.ID,
			Message: fmt.Sprintf("preferred level %q is not a level of the cluster (levels: %s); ignored",
				pref, strings.Join(c.s.State.Levels(), ", "))})
	}
}
