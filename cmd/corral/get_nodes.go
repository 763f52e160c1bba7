package main

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/kube"
)

// nodeRow is one node, or with --by one domain of a topology level.
type nodeRow struct {
	Name    string            `json:"name"`
	Nodes   int               `json:"nodes"`
	Model   string            `json:"model,omitempty"`
	GPUs    int64             `json:"gpus"`
	Used    string            `json:"used"` // GPUs the bound pods ask for
	Free    string            `json:"free"`
	Health  string            `json:"health"` // Ready, or what is wrong
	Holds   []string          `json:"holds,omitempty"`
	Domains map[string]string `json:"domains,omitempty"` // level -> domain
}

func newNodesCmd() *cobra.Command {
	var gpuResource, by string
	return listCmd("nodes", "List GPU nodes (or topology domains): GPUs free and used, health, holds",
		`nodes lists the nodes with GPUs: model, GPUs, GPUs the pods bound there ask
for, free GPUs, health (NotReady, cordoned, failed GPUs from the
corral.dev/GPUHealthy condition or the corral.dev/unhealthy-gpus annotation, SchedulingDisabled when cordoned)
and what is held on them: reservations corral keeps for waiting jobs (read from
those jobs' reasons) and MIG re-partitions it asked for. --by LEVEL sums per
domain of a level of the Topology (e.g. --by rack); -o wide adds each node's
domains.`,
		false, func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&gpuResource, "gpu-resource", v1alpha1.ResourceGPU, "the extended resource counted as GPUs")
			cmd.Flags().StringVar(&by, "by", "", "a level of the Topology (e.g. rack) to sum the nodes by")
		},
		func(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, _ string, f *getFlags) (table, error) {
			levels, err := topologyLevels(ctx, dyn)
			if err != nil {
				return table{}, err
			}
			rows, err := listNodes(ctx, client, f.schedulerName, gpuResource, levels)
			if err != nil {
				return table{}, err
			}
			if by != "" {
				var names []string
				for _, l := range levels {
					names = append(names, l.Name)
				}
				if !contains(names, by) {
					return table{}, fmt.Errorf("--by %q: the Topology has no such level (levels: %s)", by, dash(strings.Join(names, ", ")))
				}
				rows = byDomain(rows, by)
			}
			return nodesTable(rows, levels, by != ""), nil
		})
}

var topologyGVR = v1alpha1.GroupVersion.WithResource(v1alpha1.TopologyPlural)

// topologyLevels are the levels of the Topology the scheduler uses: the
// one it accepted, else the only one; none without.
func topologyLevels(ctx context.Context, dyn dynamic.Interface) ([]v1alpha1.TopologyLevel, error) {
	l, err := dyn.Resource(topologyGVR).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", v1alpha1.Resource(v1alpha1.TopologyPlural), err)
	}
	var ts []v1alpha1.Topology
	for _, u := range l.Items {
		var t v1alpha1.Topology
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &t); err != nil {
			return nil, fmt.Errorf("topology %s: %w", u.GetName(), err)
		}
		if meta.IsStatusConditionTrue(t.Status.Conditions, v1alpha1.TopologyConditionAccepted) {
			return t.Spec.Levels, nil
		}
		ts = append(ts, t)
	}
	if len(ts) == 1 {
		return ts[0].Spec.Levels, nil
	}
	return nil, nil
}

// reservedRe reads "<level> <domain> reserved" or "node <name> reserved"
// from the start of a waiting job's reason (backfill.Describe).
var reservedRe = regexp.MustCompile(`^(\S+) (\S+) reserved, expected start in ~?(.+)$`)

func listNodes(ctx context.Context, client kubernetes.Interface, schedulerName, gpuResource string, levels []v1alpha1.TopologyLevel) ([]nodeRow, error) {
	nl, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	pl, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	used := map[string]int64{}
	// holds by (level, domain): a reservation names a level's domain.
	holds := map[[2]string][]string{}
	seenJob := map[string]bool{}
	for i := range pl.Items {
		p := &pl.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.Spec.NodeName != "" {
			used[p.Spec.NodeName] += podGPUMilli(p, gpuResource)
			continue
		}
		if p.Spec.SchedulerName != schedulerName {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse {
				continue
			}
			m := reservedRe.FindStringSubmatch(reservationOf(c.Message))
			key, kind, name := kube.JobOf(p)
			if m == nil || seenJob[key] {
				continue
			}
			seenJob[key] = true
			holds[[2]string{m[1], m[2]}] = append(holds[[2]string{m[1], m[2]}],
				fmt.Sprintf("reserved for %s/%s/%s (in ~%s)", p.Namespace, strings.ToLower(kind), name, m[3]))
		}
	}
	var rows []nodeRow
	for i := range nl.Items {
		n := &nl.Items[i]
		q, ok := n.Status.Allocatable[corev1.ResourceName(gpuResource)]
		if !ok || q.Value() == 0 {
			continue
		}
		r := nodeRow{Name: n.Name, Nodes: 1, Model: kube.NodeModel(n), GPUs: q.Value(), Health: nodeHealth(n)}
		r.Used = formatMilli(used[n.Name])
		r.Free = formatMilli(max(0, r.GPUs*1000-used[n.Name]))
		if len(levels) > 0 {
			r.Domains = map[string]string{}
		}
		for _, l := range levels {
			d := n.Labels[l.NodeLabel]
			r.Domains[l.Name] = d
			r.Holds = append(r.Holds, holds[[2]string{l.Name, d}]...)
		}
		r.Holds = append(r.Holds, holds[[2]string{"node", n.Name}]...)
		if w := n.Annotations[v1alpha1.AnnotationMIGLayoutWanted]; w != "" {
			r.Holds = append(r.Holds, "MIG re-partition asked: "+w)
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows, nil
}

// nodeHealth says what keeps a node's GPUs from scheduling, "Ready" when
// nothing does.
func nodeHealth(n *corev1.Node) string {
	var bad []string
	ready := false
	for _, c := range n.Status.Conditions {
		switch {
		case c.Type == corev1.NodeReady:
			ready = c.Status == corev1.ConditionTrue
		case string(c.Type) == v1alpha1.ConditionGPUHealthy && c.Status == corev1.ConditionFalse:
			bad = append(bad, "GPUs failed")
		}
	}
	if !ready {
		bad = append([]string{"NotReady"}, bad...)
	}
	if n.Spec.Unschedulable {
		bad = append(bad, "SchedulingDisabled")
	}
	if v := n.Annotations[v1alpha1.AnnotationUnhealthyGPUs]; v != "" {
		n := len(strings.Split(v, ","))
		bad = append(bad, fmt.Sprintf("%d GPU%s failed", n, map[bool]string{true: "s"}[n > 1]))
	}
	if len(bad) == 0 {
		return "Ready"
	}
	return strings.Join(bad, ",")
}

// byDomain sums node rows per domain of a topology level.
func byDomain(rows []nodeRow, level string) []nodeRow {
	by := map[string]*nodeRow{}
	var names []string
	usedMilli := map[string]int64{}
	for _, r := range rows {
		d := r.Domains[level]
		if d == "" {
			d = "<none>"
		}
		agg := by[d]
		if agg == nil {
			agg = &nodeRow{Name: d, Health: ""}
			by[d] = agg
			names = append(names, d)
		}
		agg.Nodes++
		agg.GPUs += r.GPUs
		usedMilli[d] += parseMilli(r.Used)
		if agg.Model == "" || agg.Model == r.Model {
			agg.Model = r.Model
		} else {
			agg.Model = "mixed"
		}
		if r.Health != "Ready" {
			agg.Health = strings.TrimPrefix(agg.Health+","+r.Name+":"+r.Health, ",")
		}
		for _, h := range r.Holds {
			if !contains(agg.Holds, h) {
				agg.Holds = append(agg.Holds, h)
			}
		}
	}
	sort.Strings(names)
	out := make([]nodeRow, 0, len(names))
	for _, d := range names {
		r := by[d]
		r.Used = formatMilli(usedMilli[d])
		r.Free = formatMilli(max(0, r.GPUs*1000-usedMilli[d]))
		if r.Health == "" {
			r.Health = "Ready"
		}
		out = append(out, *r)
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func parseMilli(s string) int64 {
	var f float64
	if _, err := fmt.Sscan(s, &f); err != nil {
		return 0
	}
	return int64(f*1000 + 0.5)
}

func nodesTable(rows []nodeRow, levels []v1alpha1.TopologyLevel, byDomain bool) table {
	t := table{items: rows}
	if byDomain {
		t.header = []string{"DOMAIN", "NODES", "MODEL", "GPUS", "USED", "FREE", "HEALTH", "HOLDS"}
	} else {
		t.header = []string{"NAME", "MODEL", "GPUS", "USED", "FREE", "HEALTH", "HOLDS"}
		for _, l := range levels {
			t.wideHeader = append(t.wideHeader, strings.ToUpper(l.Name))
		}
	}
	for _, r := range rows {
		holds := dash(strings.Join(r.Holds, "; "))
		if byDomain {
			t.rows = append(t.rows, []string{r.Name, fmt.Sprint(r.Nodes), dash(r.Model), fmt.Sprint(r.GPUs), r.Used, r.Free, r.Health, holds})
			t.wideRows = append(t.wideRows, nil)
			continue
		}
		t.rows = append(t.rows, []string{r.Name, dash(r.Model), fmt.Sprint(r.GPUs), r.Used, r.Free, r.Health, holds})
		var w []string
		for _, l := range levels {
			w = append(w, dash(r.Domains[l.Name]))
		}
		t.wideRows = append(t.wideRows, w)
	}
	return t
}
