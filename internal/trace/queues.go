package trace

import (
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/workload"
)

// QueuePresets lists the built-in queue sets, for --help.
func QueuePresets() []string { return []string{"teams", "teams-strict"} }

// LoadQueues reads the queues of a simulation: a preset sized to the
// cluster ("teams", "teams-strict") or a YAML queue file (docs/formats.md,
// "Queue file").
func LoadQueues(spec string, c *ClusterSpec) ([]cycle.QueueSpec, error) {
	switch spec {
	case "teams":
		return teamsPreset(c, false), nil
	case "teams-strict":
		return teamsPreset(c, true), nil
	}
	f, err := os.Open(spec)
	if err != nil {
		if os.IsNotExist(err) && !strings.ContainsAny(spec, `/\.`) {
			return nil, fmt.Errorf("queues %q are neither a file nor a preset (%s)", spec, strings.Join(QueuePresets(), ", "))
		}
		return nil, err
	}
	defer f.Close()
	return ReadQueuesYAML(f, spec)
}

// teamsPreset is the three queues gen:llm submits to (team-a, team-b,
// team-c): each is guaranteed a quarter of every GPU model and may reclaim
// it (strictly: from a borrower holding part of its own guarantee too);
// the spare quarter goes 1 : 2 : 1.
func teamsPreset(c *ClusterSpec, strict bool) []cycle.QueueSpec {
	perModel := map[string]int64{}
	for i := range c.Nodes {
		for _, d := range c.Nodes[i].Devices {
			perModel[d.Model]++
		}
	}
	g := cycle.Amounts{}
	for m, n := range perModel {
		g[cycle.GPU(m)] = n / 4 * workload.MilliPerGPU
	}
	weights := []float64{1, 2, 1}
	var out []cycle.QueueSpec
	for i, name := range llmQueues {
		out = append(out, cycle.QueueSpec{Name: name, Guarantee: g.Clone(), Reclaim: true, StrictReclaim: strict,
			Weight: map[cycle.Resource]float64{cycle.AllResources: weights[i]}})
	}
	return out
}

type queueFileYAML struct {
	Queues []queueYAML `yaml:"queues"`
}

type queueYAML struct {
	Name       string             `yaml:"name"`
	Parent     string             `yaml:"parent"`
	Guarantee  map[string]float64 `yaml:"guarantee"`
	Limit      map[string]float64 `yaml:"limit"`
	Weight     map[string]float64 `yaml:"weight"`
	Priority   int32              `yaml:"priority"`
	Namespaces []string           `yaml:"namespaces"`
	Reclaim    bool               `yaml:"reclaim"`
	// StrictReclaim implies Reclaim (the Queue CRD's reclaimPolicy Strict).
	StrictReclaim bool `yaml:"strictReclaim"`
}

// ReadQueuesYAML reads a queue file. Amounts are in users' units: GPUs for
// gpu/<model>, cores for cpu, MiB for memory, the resource's own unit
// otherwise. Whether the tree is valid is the queue package's business: the
// engine reports each problem in the plan.
func ReadQueuesYAML(r io.Reader, name string) ([]cycle.QueueSpec, error) {
	var file queueFileYAML
	doc, err := decodeYAML(r, name, &file)
	if err != nil {
		return nil, err
	}
	if len(file.Queues) == 0 {
		return nil, doc.errAt("queues", []any{"queues"}, "no queues")
	}
	var out []cycle.QueueSpec
	for i, q := range file.Queues {
		s := cycle.QueueSpec{Name: q.Name, Parent: q.Parent, Priority: q.Priority, Namespaces: q.Namespaces,
			Reclaim: q.Reclaim || q.StrictReclaim, StrictReclaim: q.StrictReclaim}
		for _, part := range []struct {
			field string
			in    map[string]float64
			out   *cycle.Amounts
		}{{"guarantee", q.Guarantee, &s.Guarantee}, {"limit", q.Limit, &s.Limit}} {
			if part.in == nil {
				continue
			}
			*part.out = cycle.Amounts{}
			keys := make([]string, 0, len(part.in))
			for k := range part.in {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				v, err := internalUnits(k, part.in[k])
				if err != nil {
					return nil, doc.errAt(part.field, []any{"queues", i, part.field, k}, "%v", err)
				}
				(*part.out)[cycle.Resource(k)] = v
			}
		}
		if q.Weight != nil {
			s.Weight = map[cycle.Resource]float64{}
			for k, v := range q.Weight {
				s.Weight[cycle.Resource(k)] = v
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// internalUnits converts a user amount to the queue package's unit.
func internalUnits(resource string, v float64) (int64, error) {
	scale := 1.0
	switch {
	case strings.HasPrefix(resource, "gpu/"):
		scale = workload.MilliPerGPU
	case resource == string(cycle.CPU):
		scale = 1000
	}
	x := v * scale
	if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > 1e15 {
		return 0, fmt.Errorf("%s: %g is not a usable amount", resource, v)
	}
	return int64(math.Round(x)), nil
}
