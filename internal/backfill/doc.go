// Package backfill keeps a blocked head job from starving and keeps GPUs busy
// behind it: it finds the earliest time a gang fits by replaying the
// expected ends of running jobs (reservations), says which waiting jobs may
// use reserved capacity (EASY backfill), estimates runtimes from declared
// values or history, and holds pools of capacity for a class of jobs.
//
// Cycle makes one scheduling cycle's backfill decisions: starvation
// reservations and straggler eviction, the reserved and pooled nodes each
// job may not use, shrinking elastic jobs, pool reclaim, growth, strict
// FIFO and max runtime. It changes capacity only through the cycle's
// ledger, reached through the Ledger interface declared here.
//
// It is engine code: no I/O, no clock (times are inputs), deterministic. The
// engine calls it from clearly separated steps of Engine.Cycle; the history
// of completed runtimes is kept by the driver and passed in the snapshot,
// as the workload mix is, so the engine stays stateless.
package backfill
