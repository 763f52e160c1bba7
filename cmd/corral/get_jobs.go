package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/kube"
)

// jobRow is one job of `corral jobs`; its JSON is the -o json / yaml form.
type jobRow struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"` // kind/name of the object that defines the gang
	Queue     string `json:"queue"`
	State     string `json:"state"`
	Pods      int    `json:"pods"`
	Bound     int    `json:"bound"`
	Running   int    `json:"running"`
	GPUs      string `json:"gpus"` // total GPUs the pods ask for
	// WaitSeconds: for a waiting job, since its first pod was created; for
	// a started one, how long it waited.
	WaitSeconds int64  `json:"waitSeconds"`
	Reason      string `json:"reason,omitempty"`
	Message     string `json:"message,omitempty"`
	Reservation string `json:"reservation,omitempty"`
	Nodes       string `json:"nodes,omitempty"`
}

func newJobsCmd(now func() time.Time) *cobra.Command {
	var gpuResource string
	return listCmd("jobs", "List corral's jobs: queue, state, size, wait, reason, reservation",
		`jobs lists the jobs (gangs) whose pods name corral as their scheduler, one row
per gang as the scheduler groups them (Job, JobSet, LeaderWorkerSet, PodGroup,
corral.dev/gang annotation, or a lone pod), with their queue, state, pods bound
of all, GPUs asked for, how long they waited, and for waiting jobs the reason
corral gives and the reservation it holds for them. Jobs whose pods have all
ended are not shown. -o wide adds the reason's message and the nodes.

States: Pending (no pod bound), Partial (some bound: a gang binding, or the
rest of a gang waiting for room), Starting (all bound, not all running),
Running.`,
		true, func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&gpuResource, "gpu-resource", v1alpha1.ResourceGPU, "the extended resource counted as GPUs")
		},
		func(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, ns string, f *getFlags) (table, error) {
			queues, err := listQueueObjects(ctx, dyn)
			if err != nil {
				return table{}, err
			}
			rows, err := listJobs(ctx, client, ns, f.schedulerName, gpuResource, queues, now())
			if err != nil {
				return table{}, err
			}
			return jobsTable(rows, ns == ""), nil
		})
}

// listJobs groups the scheduler's live pods into jobs.
func listJobs(ctx context.Context, client kubernetes.Interface, ns, schedulerName, gpuResource string, queues []v1alpha1.Queue, now time.Time) ([]jobRow, error) {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.schedulerName", schedulerName).String()})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	type group struct {
		ns, name string
		pods     []*corev1.Pod
	}
	byKey := map[string]*group{}
	var keys []string
	for i := range pods.Items {
		p := &pods.Items[i]
		// The field selector is a request; a server (or a fake) that
		// ignores it must not change the answer.
		if p.Spec.SchedulerName != schedulerName || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		key, kind, name := kube.JobOf(p)
		g := byKey[key]
		if g == nil {
			g = &group{ns: p.Namespace, name: strings.ToLower(kind) + "/" + name}
			byKey[key] = g
			keys = append(keys, key)
		}
		g.pods = append(g.pods, p)
	}
	sort.Strings(keys)
	rows := make([]jobRow, 0, len(keys))
	for _, k := range keys {
		g := byKey[k]
		sort.Slice(g.pods, func(i, j int) bool { return g.pods[i].Name < g.pods[j].Name })
		rows = append(rows, jobOf(g.ns, g.name, g.pods, gpuResource, queues, now))
	}
	return rows, nil
}

func jobOf(ns, name string, pods []*corev1.Pod, gpuResource string, queues []v1alpha1.Queue, now time.Time) jobRow {
	r := jobRow{Namespace: ns, Name: name, Pods: len(pods), Queue: queueOf(pods[0], queues)}
	var milli int64
	var created, started time.Time
	var nodes []string
	seen := map[string]bool{}
	for _, p := range pods {
		milli += podGPUMilli(p, gpuResource)
		if created.IsZero() || p.CreationTimestamp.Time.Before(created) {
			created = p.CreationTimestamp.Time
		}
		if p.Spec.NodeName != "" {
			r.Bound++
			if t := kube.BoundAt(p); t.After(started) {
				started = t
			}
			if !seen[p.Spec.NodeName] {
				seen[p.Spec.NodeName] = true
				nodes = append(nodes, p.Spec.NodeName)
			}
			if p.Status.Phase == corev1.PodRunning {
				r.Running++
			}
			continue
		}
		// The first waiting pod that carries corral's reason speaks for
		// the job: the scheduler writes the same reason on all of them.
		if r.Reason == "" {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					r.Reason, r.Message = c.Reason, c.Message
				}
			}
		}
	}
	r.GPUs = formatMilli(milli)
	r.Nodes = strings.Join(nodes, ",")
	r.Reservation = reservationOf(r.Message)
	switch {
	case r.Bound == 0:
		r.State = "Pending"
	case r.Bound < r.Pods:
		r.State = "Partial"
	case r.Running < r.Pods:
		r.State = "Starting"
	default:
		r.State = "Running"
	}
	end := now
	if r.Bound == r.Pods && !started.IsZero() {
		end = started
	}
	if !created.IsZero() && end.After(created) {
		r.WaitSeconds = int64(end.Sub(created) / time.Second)
	}
	return r
}

// queueOf is the queue a pod is in, as the scheduler resolves it: its label,
// else the queue that is its namespace's default, else "default".
func queueOf(p *corev1.Pod, queues []v1alpha1.Queue) string {
	if q := p.Labels[v1alpha1.LabelQueue]; q != "" {
		return q
	}
	var claim []string
	for _, q := range queues {
		for _, n := range q.Spec.DefaultForNamespaces {
			if n == p.Namespace {
				claim = append(claim, q.Name)
			}
		}
	}
	if len(claim) == 1 {
		return claim[0]
	}
	return "default"
}

// podGPUMilli is what a pod asks for in GPU-milli: whole GPUs of the
// extended resource, or a fraction by annotation.
func podGPUMilli(p *corev1.Pod, gpuResource string) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		q, ok := c.Resources.Limits[corev1.ResourceName(gpuResource)]
		if !ok {
			q, ok = c.Resources.Requests[corev1.ResourceName(gpuResource)]
		}
		if ok {
			n += q.Value()
		}
	}
	if n == 0 {
		if v, err := strconv.ParseInt(p.Annotations[v1alpha1.AnnotationGPUMilli], 10, 64); err == nil && v > 0 && v < 1000 {
			return v
		}
	}
	return n * 1000
}

func formatMilli(m int64) string {
	if m%1000 == 0 {
		return strconv.FormatInt(m/1000, 10)
	}
	return strconv.FormatFloat(float64(m)/1000, 'f', -1, 64)
}

// reservationOf reads the reservation corral holds for a waiting job from
// the start of its reason ("rack r1 reserved, expected start in ~3 h; ...").
func reservationOf(msg string) string {
	first, _, _ := strings.Cut(msg, "; ")
	if strings.Contains(first, " reserved, expected start in ") {
		return first
	}
	return ""
}

func jobsTable(rows []jobRow, allNamespaces bool) table {
	t := table{items: rows}
	t.header = []string{"NAME", "QUEUE", "STATE", "PODS", "GPUS", "WAIT", "REASON", "RESERVATION"}
	if allNamespaces {
		t.header = append([]string{"NAMESPACE"}, t.header...)
	}
	t.wideHeader = []string{"NODES", "MESSAGE"}
	for _, r := range rows {
		row := []string{r.Name, r.Queue, r.State, fmt.Sprintf("%d/%d", r.Bound, r.Pods), r.GPUs,
			age(time.Duration(r.WaitSeconds) * time.Second), dash(r.Reason), dash(r.Reservation)}
		if allNamespaces {
			row = append([]string{r.Namespace}, row...)
		}
		t.rows = append(t.rows, row)
		t.wideRows = append(t.wideRows, []string{dash(r.Nodes), dash(r.Message)})
	}
	return t
}
