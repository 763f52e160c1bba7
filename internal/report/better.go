package report

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// direction says which way a column's figure is better. A table that
// gives no direction lets a reader take a higher wait for a win; one that
// marks the report's own policy bold lets it look best where it is worst.
// So every column says ↑ or ↓, and the best cell of each column (not a
// policy's row) carries the mark.
type direction int8

const (
	neutral direction = iota // no better side: a count of the input, a context figure
	higher
	lower
)

// Markers a cell can hold instead of a figure. They differ on purpose:
// "n/a" is a figure that cannot exist for this run (no queues, so no
// fairness), "none" a figure that could have but did not (no job started,
// so no wait), and "–" one the run did not record.
const (
	notApplicable = "n/a"
	never         = "none"
	bestMark      = "*"
	// partialMark follows a wait or JCT that leaves out jobs that never
	// started (or finished): a short wait of the few jobs a policy started
	// is not better than the longer waits of one that started them all, so
	// such a cell never gets the best mark.
	partialMark = "†"
)

// columnDirection reads a column's direction from its header, so that
// columns added later need only a line here.
func columnDirection(head string) direction {
	first, _, _ := strings.Cut(head, "\n")
	switch {
	case strings.HasSuffix(head, "min-dom %"), head == "PCIe\nmin %", head == "util\n%", head == "useful\n%", head == "work\n%",
		head == "Jain", head == "goodput\n%", head == "jobs\ndone":
		return higher
	case strings.HasPrefix(first, "wait"), first == "JCT", head == "makespan", head == "rdzv\nfailed", first == "unalloc", first == "recovery",
		head == "frag\n%", head == "decision\nµs/pod", head == "still\npending", head == "partial\ngangs",
		head == "comm\nslowdown", head == "evictions", first == "GPU-h lost", head == "late queue\nshort",
		strings.HasSuffix(head, "GPU-h"):
		return lower
	}
	return neutral
}

func (d direction) arrow() string {
	switch d {
	case higher:
		return " ↑"
	case lower:
		return " ↓"
	}
	return ""
}

// markBest adds the direction to each header and the best mark to the best
// cell(s) of each column with a direction. Cells compare by what they show
// (the mean before any "±"), so cells that read the same tie. A column
// where every row ties, or with fewer than two figures, gets no mark: there
// is nothing to prefer.
func markBest(s *section) {
	for col := 1; col < len(s.Header); col++ {
		d := columnDirection(s.Header[col])
		s.Header[col] += d.arrow()
		if d == neutral {
			continue
		}
		vals := make([]float64, len(s.Rows))
		n := 0
		best := math.NaN()
		for i, r := range s.Rows {
			v, ok := cellValue(r[col])
			vals[i] = math.NaN()
			if !ok {
				continue
			}
			vals[i] = v
			n++
			if math.IsNaN(best) || (d == higher && v > best) || (d == lower && v < best) {
				best = v
			}
		}
		if n < 2 {
			continue
		}
		winners := 0
		for _, v := range vals {
			if v == best {
				winners++
			}
		}
		if winners == n {
			continue
		}
		for i := range s.Rows {
			if vals[i] == best {
				s.Rows[i][col] += bestMark
			} else if !strings.HasSuffix(s.Rows[i][col], partialMark) {
				// Right-aligned digits stay in line with a marked cell's.
				s.Rows[i][col] += strings.Repeat(" ", len(bestMark))
			}
		}
	}
}

var durationPart = regexp.MustCompile(`^(\d+(?:\.\d+)?)([dhms])`)

// cellValue reads back the figure a cell shows: a number, a duration as
// humanDuration writes it, or nothing for the markers.
func cellValue(cell string) (float64, bool) {
	cell, _, _ = strings.Cut(cell, " ±")
	cell = strings.TrimSpace(cell)
	switch cell {
	case "", none, notApplicable, never:
		return 0, false
	}
	if strings.HasSuffix(cell, partialMark) {
		return 0, false
	}
	switch cell {
	case "<0.1s":
		return 0.05, true
	}
	if v, err := strconv.ParseFloat(cell, 64); err == nil {
		return v, true
	}
	unit := map[string]float64{"d": 86400, "h": 3600, "m": 60, "s": 1}
	var sec float64
	rest := cell
	for rest != "" {
		m := durationPart.FindStringSubmatch(rest)
		if m == nil {
			return 0, false
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		sec += v * unit[m[2]]
		rest = rest[len(m[0]):]
	}
	return sec, true
}

// splitBest separates a cell's text from its best mark, for the HTML page.
func splitBest(cell string) (text string, best bool) {
	if t, ok := strings.CutSuffix(cell, bestMark); ok {
		return t, true
	}
	if t, ok := strings.CutSuffix(cell, partialMark); ok {
		return t + partialMark, false
	}
	return strings.TrimRight(cell, " "), false
}
