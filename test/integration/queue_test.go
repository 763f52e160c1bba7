package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

var queueGVR = schema.GroupVersionResource{Group: "corral.dev", Version: "v1alpha1", Resource: v1alpha1.QueuePlural}

// queueObject is a Queue as a user writes it; resources maps a resource
// name to {guaranteed, limit, weight} ("" or nil: unset).
func queueObject(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "corral.dev/v1alpha1", "kind": "Queue",
		"metadata": map[string]any{"name": name},
		"spec":     spec,
	}}
}

func createQueue(ctx context.Context, c *framework.Cluster, name string, spec map[string]any) error {
	_, err := c.Dynamic.Resource(queueGVR).Create(ctx, queueObject(name, spec), metav1.CreateOptions{})
	return err
}

// TestQueueCRDValidation: the API server refuses what one Queue object can
// get wrong (limit below quota, a weight of 0, itself as parent, the name
// root, a default namespace it does not admit) and takes good ones,
// quantities written as strings or as integers.
func TestQueueCRDValidation(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	ctx := context.Background()
	res := func(r ...map[string]any) []any {
		var out []any
		for _, m := range r {
			out = append(out, m)
		}
		return out
	}
	cases := map[string]struct {
		name    string
		spec    map[string]any
		wantErr string // "" = accepted
	}{
		"good": {"good", map[string]any{"resources": res(
			map[string]any{"name": "gpu/H100", "guaranteed": "8", "limit": "16", "weight": "2"},
			map[string]any{"name": "cpu", "guaranteed": "500m", "limit": 2},
			map[string]any{"name": "nvidia.com/gpu", "guaranteed": 4, "limit": 4},
		), "weight": "0.5", "namespaces": []any{"a", "b"}, "defaultForNamespaces": []any{"a"}, "reclaimPolicy": "Preempt"}, ""},
		"limit below quota": {"low-limit", map[string]any{"resources": res(
			map[string]any{"name": "gpu/H100", "guaranteed": "8", "limit": "4"})}, "limit must be at least guaranteed"},
		"limit below quota, integers": {"low-limit-int", map[string]any{"resources": res(
			map[string]any{"name": "memory", "guaranteed": "2Gi", "limit": 1024})}, "limit must be at least guaranteed"},
		"zero weight": {"zero-weight", map[string]any{"resources": res(
			map[string]any{"name": "gpu/H100", "weight": "0"})}, "weight must be positive"},
		"negative quota": {"negative", map[string]any{"resources": res(
			map[string]any{"name": "cpu", "guaranteed": "-1"})}, "guaranteed must not be negative"},
		"own parent":             {"selfish", map[string]any{"parent": "selfish"}, "a queue cannot be its own parent"},
		"reserved name":          {"root", map[string]any{}, "the name root is reserved"},
		"bad resource name":      {"bad-name", map[string]any{"resources": res(map[string]any{"name": "gpu//H100"})}, "name must be a resource name"},
		"default not admitted":   {"bad-default", map[string]any{"namespaces": []any{"a"}, "defaultForNamespaces": []any{"b"}}, "every namespace in defaultForNamespaces must be in namespaces"},
		"unknown reclaim policy": {"bad-policy", map[string]any{"reclaimPolicy": "Sometimes"}, "Unsupported value"},
		"strict reclaim policy":  {"strict", map[string]any{"reclaimPolicy": "Strict"}, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := createQueue(ctx, c, tc.name, tc.spec)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("accepted; want an error containing %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
	// The default reclaim policy is filled in by the schema.
	u, err := c.Dynamic.Resource(queueGVR).Create(ctx, queueObject("plain", map[string]any{}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p, _, _ := unstructured.NestedString(u.Object, "spec", "reclaimPolicy"); p != "Never" {
		t.Errorf("default reclaimPolicy = %q, want Never", p)
	}
}

// queuePod is a bare 1-GPU corral pod in a queue ("" = no label).
func queuePod(ns, name, q string, gpus int, ann map[string]string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{}, Annotations: ann},
		Spec: kit.GPUPodSpec(gpus)}
	if q != "" {
		p.Labels[v1alpha1.LabelQueue] = q
	}
	return p
}

func queueCondition(t *testing.T, c *framework.Cluster, name string) (status, reason, message string) {
	t.Helper()
	u, err := c.Dynamic.Resource(queueGVR).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return "", "", err.Error()
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, ci := range conds {
		m := ci.(map[string]any)
		if m["type"] == v1alpha1.QueueConditionAccepted {
			return fmt.Sprint(m["status"]), fmt.Sprint(m["reason"]), fmt.Sprint(m["message"])
		}
	}
	return "", "", "no Accepted condition"
}

// TestQueueAdmission: pods naming a queue that does not exist, an inner
// queue, or a queue their namespace may not use, and pods with no queue
// where the namespace has no default, wait with a precise reason and an
// event and are never bound; a good pod, and a pod of a namespace with a
// default queue, bind. Each Queue's status says whether it is in the tree.
func TestQueueAdmission(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	kit.AddRacks(t, c, 1, 2)
	nsA := kit.Namespace(t, c, "team-a-")
	nsB := kit.Namespace(t, c, "team-b-")
	ctx := context.Background()
	for name, spec := range map[string]map[string]any{
		"org":    {},
		"team-a": {"parent": "org", "namespaces": []any{nsA}, "defaultForNamespaces": []any{nsA}},
		"team-x": {"parent": "org"},
		"orphan": {"parent": "nope"},
	} {
		if err := createQueue(ctx, c, name, spec); err != nil {
			t.Fatal(err)
		}
	}
	startCorral(t, c)

	for _, p := range []*corev1.Pod{
		queuePod(nsA, "good", "team-a", 1, nil),
		queuePod(nsA, "by-default", "", 1, nil),
		queuePod(nsA, "unknown", "nope", 1, nil),
		queuePod(nsA, "inner", "org", 1, nil),
		queuePod(nsA, "orphaned", "orphan", 1, nil),
		queuePod(nsB, "denied", "team-a", 1, nil),
		queuePod(nsB, "no-default", "", 1, nil),
	} {
		if _, err := c.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	type key struct{ ns, name string }
	want := map[key]struct{ reason, text string }{
		{nsA, "unknown"}:    {"UnknownQueue", `queue "nope" does not exist`},
		{nsA, "inner"}:      {"NotLeaf", `queue "org" is not a leaf queue; submit to one of its leaves (team-a, team-x)`},
		{nsA, "orphaned"}:   {"InvalidQueue", `queue "orphan" is invalid: unknown parent "nope"`},
		{nsB, "denied"}:     {"NamespaceDenied", fmt.Sprintf("namespace %q may not submit to queue \"team-a\" (it admits namespaces %s)", nsB, nsA)},
		{nsB, "no-default"}: {"NoDefault", fmt.Sprintf("namespace %q has no default queue", nsB)},
	}
	eventually(t, 60*time.Second, "refusals on the bad pods, the good pods bound", func() (bool, string) {
		for k, w := range want {
			p, err := c.Client.CoreV1().Pods(k.ns).Get(ctx, k.name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if p.Spec.NodeName != "" {
				t.Fatalf("%s was bound despite its queue", k.name)
			}
			reason, msg := scheduledCondition(p)
			if reason != w.reason || !strings.Contains(msg, w.text) {
				return false, fmt.Sprintf("%s: %s %q", k.name, reason, msg)
			}
		}
		for _, name := range []string{"good", "by-default"} {
			p, err := c.Client.CoreV1().Pods(nsA).Get(ctx, name, metav1.GetOptions{})
			if err != nil || p.Spec.NodeName == "" {
				return false, name + " not bound"
			}
		}
		return true, ""
	})
	// The refusal is an event too.
	eventually(t, 30*time.Second, "a FailedScheduling event on the denied pod", func() (bool, string) {
		evs, err := c.Client.EventsV1().Events(nsB).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "denied" && e.Reason == "FailedScheduling" && strings.Contains(e.Note, "may not submit to queue") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events, none for pod denied", len(evs.Items))
	})
	// Queue status: Accepted on the tree, with the reason on the orphan.
	eventually(t, 30*time.Second, "Queue conditions", func() (bool, string) {
		for name, want := range map[string][2]string{
			"team-a": {"True", v1alpha1.QueueReasonActive},
			"org":    {"True", v1alpha1.QueueReasonActive},
			"orphan": {"False", v1alpha1.QueueReasonInvalid},
		} {
			st, reason, msg := queueCondition(t, c, name)
			if st != want[0] || reason != want[1] {
				return false, fmt.Sprintf("%s: %s %s %q", name, st, reason, msg)
			}
			if name == "orphan" && msg != `unknown parent "nope"` {
				return false, "orphan message " + msg
			}
		}
		return true, ""
	})
	eventually(t, 30*time.Second, "an Invalid event on the orphan Queue", func() (bool, string) {
		evs, err := c.Client.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Queue" && e.Regarding.Name == "orphan" && e.Reason == v1alpha1.QueueReasonInvalid &&
				e.Type == corev1.EventTypeWarning && e.Note == `unknown parent "nope"` {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events, none for Queue orphan", len(evs.Items))
	})
	// Still never bound.
	for k := range want {
		p, err := c.Client.CoreV1().Pods(k.ns).Get(ctx, k.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			t.Errorf("%s bound", k.name)
		}
	}
}
