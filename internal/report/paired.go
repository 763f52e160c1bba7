package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// SeedRuns is one policy's runs from a JSON summary (WriteJSON): each
// seed's summary keys as numbers (maps and strings are left out).
type SeedRuns struct {
	Name string
	Runs map[int64]map[string]float64
}

// ReadSeedRuns reads one policy's runs from a JSON summary.
func ReadSeedRuns(r io.Reader, name, policy string) (SeedRuns, error) {
	var doc struct {
		Policies map[string]struct {
			Runs []map[string]any `json:"runs"`
		} `json:"policies"`
	}
	if err := json.NewDecoder(r).Decode(&doc); err != nil {
		return SeedRuns{}, fmt.Errorf("%s: %w", name, err)
	}
	p, ok := doc.Policies[policy]
	if !ok {
		known := make([]string, 0, len(doc.Policies))
		for k := range doc.Policies {
			known = append(known, k)
		}
		sort.Strings(known)
		return SeedRuns{}, fmt.Errorf("%s: no policy %q (it has %s)", name, policy, strings.Join(known, ", "))
	}
	out := SeedRuns{Name: name, Runs: map[int64]map[string]float64{}}
	for _, run := range p.Runs {
		seed, ok := run["seed"].(float64)
		if !ok {
			return SeedRuns{}, fmt.Errorf("%s: a run without a seed", name)
		}
		nums := map[string]float64{}
		for k, v := range run {
			if f, ok := v.(float64); ok {
				nums[k] = f
			}
		}
		out.Runs[int64(seed)] = nums
	}
	return out, nil
}

// Pairing compares one row with the baseline on the seeds both ran: the
// same input and failure stream, so the differences are paired.
type Pairing struct {
	Name  string
	Seeds int
	Mean  float64 // the row's mean of the metric
	// Change is the row's total over the baseline's, minus one.
	Change float64
	// Lower counts the seeds where the row is below the baseline; T is the
	// paired t statistic of the differences (0 with fewer than two seeds
	// or no spread).
	Lower int
	T     float64
}

// Paired compares each row with the baseline on metric (a JSON key of the
// summary, e.g. "failure_lost_gpu_hours"). A row that shares no seed with
// the baseline, or a metric no run has, is an error.
func Paired(metric string, base SeedRuns, rows ...SeedRuns) ([]Pairing, error) {
	var out []Pairing
	seen := false
	for _, row := range append([]SeedRuns{base}, rows...) {
		var seeds []int64
		for s := range row.Runs {
			if _, ok := base.Runs[s]; ok {
				seeds = append(seeds, s)
			}
		}
		if len(seeds) == 0 {
			return nil, fmt.Errorf("%s shares no seed with %s", row.Name, base.Name)
		}
		sort.Slice(seeds, func(i, j int) bool { return seeds[i] < seeds[j] })
		p := Pairing{Name: row.Name, Seeds: len(seeds)}
		var sum, baseSum float64
		diffs := make([]float64, 0, len(seeds))
		for _, s := range seeds {
			// A key the summary omitted is zero (omitempty).
			v, b := row.Runs[s][metric], base.Runs[s][metric]
			if _, ok := row.Runs[s][metric]; ok {
				seen = true
			}
			sum += v
			baseSum += b
			diffs = append(diffs, v-b)
			if v < b {
				p.Lower++
			}
		}
		p.Mean = sum / float64(len(seeds))
		if baseSum != 0 {
			p.Change = sum/baseSum - 1
		}
		p.T = pairedT(diffs)
		out = append(out, p)
	}
	if !seen {
		return nil, fmt.Errorf("no run has %q (keys: docs/metrics.md)", metric)
	}
	return out, nil
}

func pairedT(d []float64) float64 {
	n := float64(len(d))
	if n < 2 {
		return 0
	}
	var mean float64
	for _, x := range d {
		mean += x / n
	}
	var ss float64
	for _, x := range d {
		ss += (x - mean) * (x - mean)
	}
	sd := math.Sqrt(ss / (n - 1))
	if sd == 0 {
		return 0
	}
	return mean / (sd / math.Sqrt(n))
}
