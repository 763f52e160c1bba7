package main

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// batchProgress is one bar for a whole `corral sim` batch (every policy on
// every seed), so that the time left is the batch's, not one run's. On a
// terminal it redraws in place; elsewhere (CI logs, pipes) it prints one
// line per run, which a log keeps readable.
type batchProgress struct {
	w          io.Writer
	bar        *progressbar.ProgressBar
	runs, done int
}

// unitsPerRun is a run's share of the bar: fine enough that a long run
// moves it.
const unitsPerRun = 1000

func newBatchProgress(w io.Writer, runs int, tty bool) *batchProgress {
	b := &batchProgress{w: w, runs: runs}
	if tty {
		b.bar = progressbar.NewOptions(runs*unitsPerRun,
			progressbar.OptionSetWriter(w),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionSetPredictTime(true),
		)
	}
	return b
}

// start announces the next run and returns its progress callback for
// sim.Config.Progress (nil when not drawing).
func (b *batchProgress) start(what string) func(done, total int) {
	if b.bar == nil {
		fmt.Fprintf(b.w, "run %d of %d: %s ...\n", b.done+1, b.runs, what)
		return nil
	}
	b.bar.Describe(fmt.Sprintf("run %d/%d %-24s", b.done+1, b.runs, what))
	base := b.done * unitsPerRun
	return func(done, total int) {
		if total > 0 {
			_ = b.bar.Set(base + min(done, total)*unitsPerRun/total)
		}
	}
}

// runDone marks the current run finished.
func (b *batchProgress) runDone() {
	b.done++
	if b.bar != nil {
		_ = b.bar.Set(b.done * unitsPerRun)
	}
}

func (b *batchProgress) finish() {
	if b.bar != nil {
		_ = b.bar.Finish()
	}
}
