package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// TestTaintedGPUPool: a managed-cloud GPU pool taints its nodes
// nvidia.com/gpu=present:NoSchedule. Pods that tolerate the taint use the
// pool, pods that do not never land on it and are told why, and replicas
// with hostname anti-affinity spread one per node.
func TestTaintedGPUPool(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	taint := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	var names []string
	for i := 0; i < 6; i++ {
		name := fmt.Sprintf("pool-%d", i)
		if _, err := c.AddGPUNode(ctx, framework.NodeSpec{Name: name, GPUs: 8, Taints: []corev1.Taint{taint},
			Labels: map[string]string{v1alpha1.LabelGPUModel: "H100", "pool": "gpu"}}); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	if _, err := c.AddGPUNode(ctx, framework.NodeSpec{Name: "plain-0", GPUs: 8,
		Labels: map[string]string{v1alpha1.LabelGPUModel: "H100"}}); err != nil {
		t.Fatal(err)
	}
	for _, n := range append(names, "plain-0") {
		if err := c.WaitNodeReady(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	ns := kit.Namespace(t, c, "taint-")
	startCorral(t, c)
	tolerateGPU := []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	// Bare pods, one gang per app: kwok completes Job-owned pods at once,
	// which would free their nodes before the next step looks.
	createGang := func(app string, pods, gpus int, tol []corev1.Toleration, aff *corev1.Affinity) {
		t.Helper()
		for i := 0; i < pods; i++ {
			spec := kit.GPUPodSpec(gpus)
			spec.Tolerations, spec.Affinity = tol, aff
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", app, i), Namespace: ns,
				Labels:      map[string]string{"app": app},
				Annotations: map[string]string{v1alpha1.AnnotationGang: app}}, Spec: spec}
			if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	boundNodes := func(app string, want int) []string {
		t.Helper()
		var nodes []string
		eventually(t, 60*time.Second, fmt.Sprintf("%d pods of %s bound", want, app), func() (bool, string) {
			pods := podsOf(t, c, ns, app)
			nodes = nodes[:0]
			for _, p := range pods {
				if p.Spec.NodeName != "" {
					nodes = append(nodes, p.Spec.NodeName)
				}
			}
			return len(pods) == want && len(nodes) == want, fmt.Sprintf("%d pods, bound on %v", len(pods), nodes)
		})
		return nodes
	}

	t.Run("a pod that does not tolerate it takes the untainted node", func(t *testing.T) {
		createGang("plain", 1, 8, nil, nil)
		if got := boundNodes("plain", 1); got[0] != "plain-0" {
			t.Errorf("intolerant pod on %s, want plain-0", got[0])
		}
	})

	t.Run("a gang that tolerates the taint uses the pool", func(t *testing.T) {
		// plain-0 is full: a toleration allows the pool, it does not
		// require it, so only a full untainted node makes this exact.
		createGang("tolerant", 4, 8, tolerateGPU, nil)
		for _, n := range boundNodes("tolerant", 4) {
			if !strings.HasPrefix(n, "pool-") {
				t.Errorf("tolerant pod on %s, want a pool node", n)
			}
		}
	})

	t.Run("a gang that does not tolerate it waits, and the reason names the taint", func(t *testing.T) {
		// Two pool nodes are free, but the pods may not use them.
		createGang("intolerant", 2, 8, nil, nil)
		want := "6 nodes have taint nvidia.com/gpu=present:NoSchedule that the pod does not tolerate"
		eventually(t, 60*time.Second, "a pending reason naming the taint", func() (bool, string) {
			pods := podsOf(t, c, ns, "intolerant")
			if len(pods) != 2 {
				return false, fmt.Sprintf("%d pods", len(pods))
			}
			for _, p := range pods {
				if p.Spec.NodeName != "" {
					t.Fatalf("intolerant pod %s bound to %s", p.Name, p.Spec.NodeName)
				}
				if _, msg := scheduledCondition(&p); !strings.Contains(msg, want) {
					return false, "PodScheduled message: " + msg
				}
			}
			return true, ""
		})
	})

	t.Run("replicas with hostname anti-affinity spread one per node", func(t *testing.T) {
		// Without the term corral packs both 1-GPU pods onto one node.
		createGang("spread", 2, 1, tolerateGPU, &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}}})
		nodes := boundNodes("spread", 2)
		if nodes[0] == nodes[1] {
			t.Errorf("both replicas on %s", nodes[0])
		}
		for _, n := range nodes {
			if !strings.HasPrefix(n, "pool-") {
				t.Errorf("replica on %s, want a free pool node", n)
			}
		}
	})
}
