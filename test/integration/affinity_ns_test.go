package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// TestPodAffinityNamespaceSelector: a pod whose affinity term selects
// namespaces by label (env=prod) goes next to the matching pod of a
// namespace with that label, read from the API server's Namespaces, and
// keeps away from it with anti-affinity; a namespace labelled only after
// the pods were created counts from the next cycle on.
func TestPodAffinityNamespaceSelector(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, n := range []string{"n0", "n1", "n2"} {
		if _, err := c.AddGPUNode(ctx, framework.NodeSpec{Name: n, GPUs: 8,
			Labels: map[string]string{v1alpha1.LabelGPUModel: "H100"}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"n0", "n1", "n2"} {
		if err := c.WaitNodeReady(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	for name, env := range map[string]string{"prod": "prod", "dev": "dev", "batch": ""} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if env != "" {
			ns.Labels["env"] = env
		}
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	startCorral(t, c)
	create := func(ns, name string, labels map[string]string, node string, aff *corev1.Affinity) {
		t.Helper()
		spec := kit.GPUPodSpec(1)
		spec.Affinity = aff
		if node != "" {
			spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Spec: spec}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nodeOf := func(ns, name string) string {
		t.Helper()
		node := ""
		eventually(t, 60*time.Second, ns+"/"+name+" bound", func() (bool, string) {
			p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			_, msg := scheduledCondition(p)
			node = p.Spec.NodeName
			return node != "", "pending: " + msg
		})
		return node
	}
	db := map[string]string{"app": "db"}
	term := func(env string) corev1.PodAffinityTerm {
		return corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: db},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": env}}}
	}
	create("prod", "db", db, "n1", nil)
	create("dev", "db", db, "n2", nil)
	if n := nodeOf("prod", "db"); n != "n1" {
		t.Fatalf("prod/db on %s", n)
	}
	nodeOf("dev", "db")

	create("batch", "near-prod", nil, "", &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term("prod")}}})
	if n := nodeOf("batch", "near-prod"); n != "n1" {
		t.Errorf("batch/near-prod on %s, want n1 beside prod/db", n)
	}
	create("batch", "away-from-prod-and-dev", nil, "", &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term("prod"), term("dev")}}})
	if n := nodeOf("batch", "away-from-prod-and-dev"); n != "n0" {
		t.Errorf("batch/away-from-prod-and-dev on %s, want n0", n)
	}

	// No namespace is labelled env=staging yet: the pod waits; labelling
	// dev so makes dev/db's node the one.
	create("batch", "near-staging", nil, "", &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term("staging")}}})
	time.Sleep(2 * time.Second)
	if p, err := c.Client.CoreV1().Pods("batch").Get(ctx, "near-staging", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Fatalf("near-staging bound to %q (err %v) with no namespace labelled env=staging", p.Spec.NodeName, err)
	}
	dev, err := c.Client.CoreV1().Namespaces().Get(ctx, "dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dev.Labels["env"] = "staging"
	if _, err := c.Client.CoreV1().Namespaces().Update(ctx, dev, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := nodeOf("batch", "near-staging"); n != "n2" {
		t.Errorf("batch/near-staging on %s, want n2 beside dev/db (%s)", n, fmt.Sprint(dev.Labels))
	}
}
