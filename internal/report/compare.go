package report

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/internal/metrics"
)

// comparison is a validated set of results: one input, several policies, each
// run with one or more seeds.
type comparison struct {
	Cluster, Trace, Protocol string
	Seeds                    []int64 // every seed of any policy, sorted
	Policies                 []policyRuns
}

// policyRuns is one policy's runs, sorted by seed.
type policyRuns struct {
	Name string
	Runs []metrics.Result
}

var errNoResults = errors.New("report: no results")

// compare groups results by policy. It fails on an empty input, on results
// of different inputs (a table comparing them would mislead) and on two runs
// of the same policy with the same seed.
func compare(results []metrics.Result) (*comparison, error) {
	if len(results) == 0 {
		return nil, errNoResults
	}
	first := results[0]
	c := &comparison{Cluster: first.Cluster, Trace: first.Trace, Protocol: first.Protocol}
	index := map[string]int{}
	seen := map[string]bool{}
	for _, r := range results {
		if r.Cluster != c.Cluster || r.Trace != c.Trace || r.Protocol != c.Protocol {
			return nil, fmt.Errorf("report: results of different inputs: %s/%s/%s and %s/%s/%s",
				c.Cluster, c.Trace, c.Protocol, r.Cluster, r.Trace, r.Protocol)
		}
		key := r.Policy + "\x00" + strconv.FormatInt(r.Seed, 10)
		if seen[key] {
			return nil, fmt.Errorf("report: two runs of policy %q with seed %d", r.Policy, r.Seed)
		}
		seen[key] = true
		i, ok := index[r.Policy]
		if !ok {
			i = len(c.Policies)
			index[r.Policy] = i
			c.Policies = append(c.Policies, policyRuns{Name: r.Policy})
		}
		c.Policies[i].Runs = append(c.Policies[i].Runs, r)
		if !slices.Contains(c.Seeds, r.Seed) {
			c.Seeds = append(c.Seeds, r.Seed)
		}
	}
	slices.Sort(c.Seeds)
	for i := range c.Policies {
		slices.SortFunc(c.Policies[i].Runs, func(a, b metrics.Result) int {
			return cmpInt64(a.Seed, b.Seed)
		})
	}
	return c, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// firstSeed is the lowest seed policy was run with.
func (c *comparison) firstSeed(policy string) int64 {
	for _, p := range c.Policies {
		if p.Name == policy {
			return p.Runs[0].Seed
		}
	}
	return 0
}

// valueFn reads one figure from a summary; ok is false when the run did not
// record it (a missing map key).
type valueFn func(s metrics.Summary) (v float64, ok bool)

// field reads a scalar field, which every run records.
func field(f func(s metrics.Summary) float64) valueFn {
	return func(s metrics.Summary) (float64, bool) { return f(s), true }
}

// entry reads one key of a map field.
func entry(m func(s metrics.Summary) map[string]float64, key string) valueFn {
	return func(s metrics.Summary) (float64, bool) {
		v, ok := m(s)[key]
		return v, ok
	}
}

// stat is a figure over the runs that recorded it.
type stat struct {
	Mean, SD float64 // SD is the sample standard deviation (n-1); 0 when N < 2
	N        int
}

// statOf summarises f over runs, in run (seed) order so sums are repeatable.
func statOf(runs []metrics.Result, f valueFn) stat {
	var vs []float64
	for _, r := range runs {
		if v, ok := f(r.Summary); ok {
			vs = append(vs, v)
		}
	}
	return statOfValues(vs)
}

func statOfValues(vs []float64) stat {
	st := stat{N: len(vs)}
	if st.N == 0 {
		return st
	}
	for _, v := range vs {
		st.Mean += v
	}
	st.Mean /= float64(st.N)
	if st.N > 1 {
		var ss float64
		for _, v := range vs {
			ss += (v - st.Mean) * (v - st.Mean)
		}
		st.SD = math.Sqrt(ss / float64(st.N-1))
	}
	return st
}

// mapKeys is the sorted union of the keys of a map field over all runs.
func mapKeys(c *comparison, m func(s metrics.Summary) map[string]float64) []string {
	var keys []string
	for _, p := range c.Policies {
		for _, r := range p.Runs {
			for k := range m(r.Summary) {
				if !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// seedList renders seeds compactly: "42–51" for a run of consecutive
// seeds, else a comma list.
func seedList(seeds []int64) string {
	if len(seeds) > 2 && seeds[len(seeds)-1]-seeds[0] == int64(len(seeds)-1) {
		return fmt.Sprintf("%d–%d", seeds[0], seeds[len(seeds)-1])
	}
	parts := make([]string, len(seeds))
	for i, s := range seeds {
		parts[i] = strconv.FormatInt(s, 10)
	}
	return strings.Join(parts, ", ")
}

// caption is the line above the table: which input, which seeds.
func (c *comparison) caption() string {
	n := len(c.Seeds)
	seeds := "seed " + seedList(c.Seeds)
	if n > 1 {
		seeds = fmt.Sprintf("seeds %s (mean of %d)", seedList(c.Seeds), n)
	}
	return fmt.Sprintf("cluster %s · trace %s · protocol %s · %s", c.Cluster, c.Trace, c.Protocol, seeds)
}
