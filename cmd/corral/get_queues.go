package main

import (
	"context"
	"fmt"
	"sort"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/corral-dev/corral/api/v1alpha1"
)

// queueRow is one queue of `corral queues`, amounts of one resource.
type queueRow struct {
	Name       string `json:"name"`
	Parent     string `json:"parent,omitempty"`
	Resource   string `json:"resource"`
	Guaranteed string `json:"guaranteed,omitempty"`
	Limit      string `json:"limit,omitempty"` // empty: unlimited
	Weight     string `json:"weight"`
	Allocated  string `json:"allocated"`
	FairShare  string `json:"fairShare"`
	Pending    string `json:"pending"`
	Borrowed   string `json:"borrowed"`
	// ReclaimPolicy is the queue's own spec.reclaimPolicy, Never when unset
	// (as the scheduler reads it); a queue below a Preempt or Strict queue
	// reclaims as its ancestor does whatever its own says.
	ReclaimPolicy string `json:"reclaimPolicy"`
	Accepted      string `json:"accepted"` // True, False, or Unknown before the scheduler saw it
	Reason        string `json:"reason,omitempty"`
}

func newQueuesCmd() *cobra.Command {
	var res string
	return listCmd("queues", "List corral's queues: guarantee, limit, allocated, fair share, pending",
		`queues lists the Queue objects (corralqueues.corral.dev) with, for one
resource (--resource, default nvidia.com/gpu: GPUs of any model; use
gpu/<model> for queues with per-model quota, cpu, memory), the guarantee,
the limit, what the queue's running pods hold, its fair share now and what
its waiting pods ask for, as the scheduler last wrote them in the status.
-o wide adds the weight, what it borrows, the reclaim policy (Never, Preempt
or Strict: the queue's own; a queue below a Preempt or Strict queue reclaims
as that ancestor does) and whether the scheduler accepted the queue into its
tree.`,
		false, func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&res, "resource", v1alpha1.ResourceGPU, "the resource to show")
		},
		func(ctx context.Context, _ kubernetes.Interface, dyn dynamic.Interface, _ string, _ *getFlags) (table, error) {
			qs, err := listQueueObjects(ctx, dyn)
			if err != nil {
				return table{}, err
			}
			return queuesTable(queueRows(qs, res)), nil
		})
}

var queueGVR = v1alpha1.GroupVersion.WithResource(v1alpha1.QueuePlural)

// listQueueObjects reads every Queue, in name order; none when the CRD is
// not installed (queues are then off: every pod is in one queue).
func listQueueObjects(ctx context.Context, dyn dynamic.Interface) ([]v1alpha1.Queue, error) {
	l, err := dyn.Resource(queueGVR).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", v1alpha1.Resource(v1alpha1.QueuePlural), err)
	}
	out := make([]v1alpha1.Queue, 0, len(l.Items))
	for _, u := range l.Items {
		var q v1alpha1.Queue
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &q); err != nil {
			return nil, fmt.Errorf("queue %s: %w", u.GetName(), err)
		}
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func queueRows(qs []v1alpha1.Queue, res string) []queueRow {
	rows := make([]queueRow, 0, len(qs))
	name := corev1.ResourceName(res)
	for _, q := range qs {
		r := queueRow{Name: q.Name, Parent: q.Spec.Parent, Resource: res, Weight: "1", Accepted: "Unknown",
			ReclaimPolicy: string(q.Spec.ReclaimPolicy)}
		if r.ReclaimPolicy == "" {
			// The CRD defaults it; an object written before the field
			// existed has none, and the scheduler reads that as Never.
			r.ReclaimPolicy = string(v1alpha1.ReclaimNever)
		}
		if q.Spec.Weight != nil {
			r.Weight = q.Spec.Weight.String()
		}
		for _, qr := range q.Spec.Resources {
			if qr.Name != res {
				continue
			}
			r.Guaranteed = quantity(name, qr.Guaranteed)
			r.Limit = quantity(name, qr.Limit)
			if qr.Weight != nil {
				r.Weight = qr.Weight.String()
			}
		}
		r.Allocated = amount(q.Status.Allocated, name)
		r.FairShare = amount(q.Status.FairShare, name)
		r.Pending = amount(q.Status.Pending, name)
		r.Borrowed = amount(q.Status.Borrowed, name)
		if c := meta.FindStatusCondition(q.Status.Conditions, v1alpha1.QueueConditionAccepted); c != nil {
			r.Accepted, r.Reason = string(c.Status), c.Reason
		}
		rows = append(rows, r)
	}
	return rows
}

// quantity renders an amount of resource name as users count it: CPU and
// memory as Kubernetes writes them (500m, 64Gi), GPUs and other devices as
// a plain number (a fair share of 12.5 GPUs, which the status holds as
// 12500m).
func quantity(name corev1.ResourceName, q *resource.Quantity) string {
	switch {
	case q == nil:
		return ""
	case name == corev1.ResourceCPU || name == corev1.ResourceMemory:
		return q.String()
	}
	return formatMilli(q.MilliValue())
}

// amount is a status figure, "0" when the scheduler wrote none (it leaves
// zero amounts out).
func amount(l corev1.ResourceList, name corev1.ResourceName) string {
	if q, ok := l[name]; ok {
		return quantity(name, &q)
	}
	return "0"
}

func queuesTable(rows []queueRow) table {
	t := table{items: rows,
		header:     []string{"NAME", "PARENT", "RESOURCE", "GUARANTEE", "LIMIT", "ALLOCATED", "FAIR SHARE", "PENDING"},
		wideHeader: []string{"WEIGHT", "BORROWED", "RECLAIM", "ACCEPTED", "REASON"}}
	for _, r := range rows {
		limit := r.Limit
		if limit == "" {
			limit = "none"
		}
		g := r.Guaranteed
		if g == "" {
			g = "0"
		}
		t.rows = append(t.rows, []string{r.Name, dash(r.Parent), r.Resource, g, limit, r.Allocated, r.FairShare, r.Pending})
		t.wideRows = append(t.wideRows, []string{r.Weight, r.Borrowed, r.ReclaimPolicy, r.Accepted, dash(r.Reason)})
	}
	return t
}
