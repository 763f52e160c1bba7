package report

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/corral-dev/corral/internal/metrics"
)

// jsonReport is the document WriteJSON writes; docs/report.md describes it.
// Keys are snake_case and stable: add keys, never rename them.
type jsonReport struct {
	// Version is the corral release that ran the simulation (Meta.Version).
	Version  string                `json:"corral_version,omitempty"`
	Cluster  string                `json:"cluster"`
	Trace    string                `json:"trace"`
	Protocol string                `json:"protocol"`
	Seeds    []int64               `json:"seeds"`
	Policies map[string]jsonPolicy `json:"policies"` // encoding/json sorts the keys
}

// jsonPolicy is one policy: the mean over its seeds, then each run.
type jsonPolicy struct {
	// Mean has every key of metrics.Summary (its JSON tags): numbers are
	// means over the runs, maps are means per key over the runs that have
	// the key. Means of counts may be fractional.
	Mean map[string]any `json:"mean"`
	Runs []jsonRun      `json:"runs"`
}

// jsonRun is one seed's summary, flattened beside the seed.
type jsonRun struct {
	Seed            int64 `json:"seed"`
	metrics.Summary       // promoted: its keys sit beside "seed"
}

// WriteJSON writes a JSON summary of results: the input, the seeds, and for
// each policy the mean over seeds of every Summary key plus each run's own
// summary. Output is indented and byte-for-byte repeatable: map keys are
// sorted, runs are in seed order. It fails on an empty input, on results of
// different inputs, and on summaries JSON cannot hold (NaN, ±Inf).
func WriteJSON(w io.Writer, results []metrics.Result) error {
	return WriteJSONMeta(w, results, Meta{})
}

// WriteJSONMeta is WriteJSON recording meta.Version as "corral_version", so
// that a summary says which release measured it.
func WriteJSONMeta(w io.Writer, results []metrics.Result, meta Meta) error {
	c, err := compare(results)
	if err != nil {
		return err
	}
	doc := jsonReport{
		Version: meta.Version,
		Cluster: c.Cluster, Trace: c.Trace, Protocol: c.Protocol,
		Seeds:    c.Seeds,
		Policies: map[string]jsonPolicy{},
	}
	for _, p := range c.Policies {
		jp := jsonPolicy{}
		for _, r := range p.Runs {
			jp.Runs = append(jp.Runs, jsonRun{Seed: r.Seed, Summary: r.Summary})
		}
		if jp.Mean, err = meanSummary(p.Runs); err != nil {
			return fmt.Errorf("report: policy %q: %w", p.Name, err)
		}
		doc.Policies[p.Name] = jp
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("report: encoding JSON: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("report: writing JSON: %w", err)
	}
	return nil
}

// meanSummary averages summaries key by key. It works on the JSON form so a
// key added to metrics.Summary is averaged without a change here: numbers
// are averaged; maps of numbers per key, over the runs that have the key
// (a topology level a run never used is unknown, not 0); anything else is
// taken from the first run that has it.
func meanSummary(runs []metrics.Result) (map[string]any, error) {
	docs := make([]map[string]any, 0, len(runs))
	for _, r := range runs {
		b, err := json.Marshal(r.Summary)
		if err != nil {
			return nil, fmt.Errorf("seed %d: %w", r.Seed, err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("seed %d: %w", r.Seed, err)
		}
		docs = append(docs, m)
	}
	return meanDocs(docs), nil
}

// meanDocs averages decoded JSON objects; see meanSummary.
func meanDocs(docs []map[string]any) map[string]any {
	var keys []string
	for _, d := range docs {
		for k := range d {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys) // sums run in doc order whatever the key order; sorted for clarity
	out := make(map[string]any, len(keys))
	for _, k := range keys {
		var nums []float64
		var objs []map[string]any
		var other any
		for _, d := range docs {
			switch v := d[k].(type) {
			case float64:
				nums = append(nums, v)
			case map[string]any:
				objs = append(objs, v)
			case nil:
				// absent or null: not recorded by this run
			default:
				if other == nil {
					other = v
				}
			}
		}
		switch {
		case len(nums) > 0:
			out[k] = statOfValues(nums).Mean
		case len(objs) > 0:
			out[k] = meanDocs(objs)
		default:
			out[k] = other
		}
	}
	return out
}
