package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/corral-dev/corral/test/integration/framework"
)

// TestSmoke starts the control plane without a scheduler, adds one kwok GPU
// node, binds a GPU pod to it directly (spec.nodeName) and waits for kwok to
// run it. It also checks the alpha/DRA APIs corral relies on are served.
func TestSmoke(t *testing.T) {
	start := time.Now()
	c := framework.Start(t, framework.Options{})
	t.Logf("control plane started in %.1fs (%s)", time.Since(start).Seconds(), c.Host)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	v, err := c.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	if v.GitVersion != "v1.36.3" {
		t.Errorf("kube-apiserver version = %q, want v1.36.3 (ldflags in hack/tools/build.sh)", v.GitVersion)
	}

	// --- a kwok node with 8 GPUs
	node, err := c.AddGPUNode(ctx, framework.NodeSpec{
		Name:   "gpu-node-0",
		GPUs:   8,
		Labels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
	})
	if err != nil {
		t.Fatalf("AddGPUNode: %v", err)
	}
	t0 := time.Now()
	if err := c.WaitNodeReady(ctx, node.Name); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s Ready after %.1fs", node.Name, time.Since(t0).Seconds())
	node, err = c.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Status.Allocatable[framework.GPUResource]; got.Value() != 8 {
		t.Errorf("allocatable %s = %s, want 8", framework.GPUResource, got.String())
	}

	// --- a pod bound directly to the node, requesting 2 GPUs
	ns, err := c.CreateNamespace(ctx, "smoke-")
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-pod", Namespace: ns.Name},
		Spec: corev1.PodSpec{
			NodeName: node.Name,
			Containers: []corev1.Container{{
				Name:  "train",
				Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse("1"),
						corev1.ResourceMemory: resource.MustParse("1Gi"),
					},
					Limits: framework.GPUQuantity(2),
				},
			}},
		},
	}
	if _, err := c.Client.CoreV1().Pods(ns.Name).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod: %v", err)
	}
	t0 = time.Now()
	running, err := c.WaitPodPhase(ctx, ns.Name, pod.Name, corev1.PodRunning)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pod %s/%s Running on %s (IP %s) after %.1fs", ns.Name, pod.Name, running.Spec.NodeName, running.Status.PodIP, time.Since(t0).Seconds())
	if got := running.Spec.Containers[0].Resources.Requests[framework.GPUResource]; got.Value() != 2 {
		t.Errorf("pod GPU request = %s, want 2 (defaulted from limits)", got.String())
	}

	// --- scheduling.k8s.io/v1alpha2 (Workload API / gang) is served
	rl, err := c.Client.Discovery().ServerResourcesForGroupVersion("scheduling.k8s.io/v1alpha2")
	if err != nil {
		t.Fatalf("discovery of scheduling.k8s.io/v1alpha2: %v", err)
	}
	var names []string
	for _, r := range rl.APIResources {
		names = append(names, r.Name)
	}
	for _, want := range []string{"workloads", "podgroups"} {
		if !slices.Contains(names, want) {
			t.Errorf("scheduling.k8s.io/v1alpha2 serves %v, missing %q", names, want)
		}
	}
	pgs, err := c.Dynamic.Resource(schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1alpha2", Resource: "podgroups"}).
		Namespace(ns.Name).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("listing podgroups through the dynamic client: %v", err)
	} else if len(pgs.Items) != 0 {
		t.Errorf("unexpected podgroups: %d", len(pgs.Items))
	}

	// --- DeviceTaintRule (resource.k8s.io/v1beta2, enabled via --runtime-config)
	rl, err = c.Client.Discovery().ServerResourcesForGroupVersion("resource.k8s.io/v1beta2")
	if err != nil {
		t.Errorf("discovery of resource.k8s.io/v1beta2: %v", err)
	} else if !slices.ContainsFunc(rl.APIResources, func(r metav1.APIResource) bool { return r.Name == "devicetaintrules" }) {
		t.Errorf("resource.k8s.io/v1beta2 does not serve devicetaintrules")
	}

	// --- resource.k8s.io/v1 DeviceClass can be created
	dc := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu.smoke.corral.dev"},
		Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{
				CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.nvidia.com"`},
			}},
		},
	}
	created, err := c.Client.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating resource.k8s.io/v1 DeviceClass: %v", err)
	}
	t.Logf("created DeviceClass %s (uid %s)", created.Name, created.UID)
}

// TestKubeScheduler starts the control plane with the stock kube-scheduler
// (Options.KubeScheduler), runs a 2-pod GPU Job to completion (the Job
// controller creates the pods, kube-scheduler binds them, kwok runs and, for
// Job pods, completes them), then checks GPU capacity is respected.
func TestKubeScheduler(t *testing.T) {
	c := framework.Start(t, framework.Options{KubeScheduler: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, name := range []string{"gpu-a", "gpu-b"} {
		if _, err := c.AddGPUNode(ctx, framework.NodeSpec{Name: name, GPUs: 8}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"gpu-a", "gpu-b"} {
		if err := c.WaitNodeReady(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	ns, err := c.CreateNamespace(ctx, "sched-")
	if err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns.Name},
		Spec: batchv1.JobSpec{
			Parallelism:  int32Ptr(2),
			Completions:  int32Ptr(2),
			BackoffLimit: int32Ptr(0),
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:      "train",
						Image:     "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Limits: framework.GPUQuantity(6)},
					}},
				},
			},
		},
	}
	if _, err := c.Client.BatchV1().Jobs(ns.Name).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	deadline := time.Now().Add(60 * time.Second)
	for {
		j, err := c.Client.BatchV1().Jobs(ns.Name).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if j.Status.Succeeded == 2 {
			break
		}
		if j.Status.Failed > 0 {
			t.Fatalf("job failed: %+v", j.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("job did not complete in 60s: %+v", j.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("job completed after %.1fs", time.Since(t0).Seconds())

	pods, err := c.Client.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job.Name})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Errorf("want 2 job pods, got %d", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("job pod %s: node=%q phase=%s, want bound and Succeeded", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
	}

	// kube-scheduler honours nvidia.com/gpu capacity: 8 GPUs fit a node
	// (bare pods are not completed by the stock stages, so it stays Running),
	// 10 do not fit anywhere.
	fits := gpuPod(ns.Name, "fits", 8)
	tooBig := gpuPod(ns.Name, "too-big", 10)
	for _, p := range []*corev1.Pod{fits, tooBig} {
		if _, err := c.Client.CoreV1().Pods(ns.Name).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := c.WaitPodPhase(ctx, ns.Name, fits.Name, corev1.PodRunning); err != nil {
		t.Error(err)
	} else {
		t.Logf("pod %s scheduled to %s and Running", p.Name, p.Spec.NodeName)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		p, err := c.Client.CoreV1().Pods(ns.Name).Get(ctx, tooBig.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			t.Fatalf("pod %s requesting 10 GPUs was bound to %s", p.Name, p.Spec.NodeName)
		}
		if slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s not reported Unschedulable in 30s: %+v", p.Name, p.Status.Conditions)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func gpuPod(ns, name string, gpus int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:      "main",
				Image:     "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Limits: framework.GPUQuantity(gpus)},
			}},
		},
	}
}

func int32Ptr(v int32) *int32 { return &v }
