package engine

import (
	"github.com/corral-dev/corral/internal/backfill"
)

// Backfill's decisions (reservations, starvation, straggler eviction,
// shrinking, pool reclaim, growth, strict FIFO, max runtime) live in
// internal/backfill (backfill.Cycle); the engine runs them against its
// ledger. These names keep the drivers' configuration as it was.
type (
	// BackfillConfig tunes reservations and runtime limits.
	BackfillConfig = backfill.Config
	// MaxRuntimeAction is what happens to a job past its max runtime.
	MaxRuntimeAction = backfill.MaxRuntimeAction
)

const (
	Terminate                = backfill.Terminate
	Requeue                  = backfill.Requeue
	DefaultReserveConfidence = backfill.DefaultReserveConfidence
	DefaultStarveAfter       = backfill.DefaultStarveAfter
)
