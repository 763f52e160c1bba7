// Package engine is corral's scheduling cycle: Engine.Cycle reads an
// immutable cycle.Snapshot and returns a cycle.Plan, in numbered steps
// (cycle.go): the running view, health, backfill's pre-placement steps,
// queues, preemption and starvation, each pending job, and the closing
// steps. It never performs I/O, never reads the clock and gives the same
// Plan for the same Snapshot; the simulator (internal/sim) and the
// Kubernetes adapter (internal/kube) carry the Plan out.
//
// The policies live in their own packages and never import this one:
// internal/queue (usage, limits, DRF order), internal/preempt (victim
// search, restart cost, checkpoint deferral), internal/backfill
// (reservations, pools, holds), internal/health (remediation, spares,
// escalation). The contract types are defined in internal/cycle; this
// package re-exports them under their old names for the drivers.
package engine
