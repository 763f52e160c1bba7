// Package engine is corral's scheduling cycle: Engine.Cycle reads an
// immutable cycle.Snapshot and returns a cycle.Plan, in numbered steps
// (cycle.go): the running view, health, backfill's pre-placement steps,
// queues, preemption and starvation, each pending job, and the closing
// steps. It never performs I/O, never reads the clock and gives the same
// Plan for the same Snapshot; the simulator (internal/sim) and the
// Kubernetes adapter (internal/kube) carry the Plan out.
//
// Each cycle works on one ledger (ledger.go): the running view, the jobs
// holding capacity, the holds table and the Plan being built. Only the
// ledger changes capacity, through its verbs (bind, evict, vacate and
// restore for trials, the holds table's take and release).
//
// The policies live in their own packages, declare the interface they need
// of the ledger, and never import this one or each other: internal/queue
// (usage, limits, DRF order), internal/preempt (preempt.Room: victims,
// reclaim, restart cost, checkpoint deferral, consolidation),
// internal/backfill (backfill.Cycle: reservations, starvation, pools,
// shrinking, growth, strict FIFO, max runtime), internal/health
// (remediation, spares, escalation). The contract types are defined in
// internal/cycle; this package re-exports them under their old names for
// the drivers.
package engine
