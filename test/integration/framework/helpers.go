package framework

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GPUResource is the extended resource advertised by the NVIDIA device
// plugin, and by AddGPUNode.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// DefaultWaitTimeout bounds the Wait* helpers when ctx has no earlier
// deadline.
const DefaultWaitTimeout = 60 * time.Second

// NodeSpec describes a fake (kwok-managed) node.
type NodeSpec struct {
	Name string
	// Labels are added to the defaults kubernetes.io/hostname=<name>,
	// kubernetes.io/os=linux, kubernetes.io/arch=amd64, type=kwok.
	Labels map[string]string
	// GPUs is the nvidia.com/gpu capacity (and allocatable); 0 omits it.
	GPUs int
	// CPU and Memory are quantities; defaults "32" and "256Gi".
	CPU    string
	Memory string
	// Pods is the pod capacity; default 110.
	Pods int
	// Taints are set on the node as given.
	Taints []corev1.Taint
	// Extra resources are advertised besides the above (e.g. MIG instances
	// as nvidia.com/mig-1g.10gb).
	Extra corev1.ResourceList
	// Annotations are added to the kwok ones.
	Annotations map[string]string
}

// AddGPUNode creates a Node that kwok manages (annotation
// kwok.x-k8s.io/node=fake) with the given capacity. Node status is kept on
// create, and kwok's node-initialize stage keeps a non-empty capacity, so the
// node advertises exactly these resources. Use WaitNodeReady afterwards.
func (c *Cluster) AddGPUNode(ctx context.Context, spec NodeSpec) (*corev1.Node, error) {
	if spec.Name == "" {
		return nil, fmt.Errorf("NodeSpec.Name is required")
	}
	cpu, mem, pods := spec.CPU, spec.Memory, spec.Pods
	if cpu == "" {
		cpu = "32"
	}
	if mem == "" {
		mem = "256Gi"
	}
	if pods <= 0 {
		pods = 110
	}
	list := corev1.ResourceList{}
	var err error
	if list[corev1.ResourceCPU], err = resource.ParseQuantity(cpu); err != nil {
		return nil, fmt.Errorf("NodeSpec.CPU: %w", err)
	}
	if list[corev1.ResourceMemory], err = resource.ParseQuantity(mem); err != nil {
		return nil, fmt.Errorf("NodeSpec.Memory: %w", err)
	}
	list[corev1.ResourcePods] = *resource.NewQuantity(int64(pods), resource.DecimalSI)
	if spec.GPUs > 0 {
		list[GPUResource] = *resource.NewQuantity(int64(spec.GPUs), resource.DecimalSI)
	}
	maps.Copy(list, spec.Extra)

	labels := map[string]string{
		corev1.LabelHostname:   spec.Name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
		"type":                 "kwok",
	}
	maps.Copy(labels, spec.Labels)
	annotations := map[string]string{
		KwokNodeAnnotation:             KwokNodeAnnotationValue,
		"node.alpha.kubernetes.io/ttl": "0",
	}
	maps.Copy(annotations, spec.Annotations)

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        spec.Name,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: corev1.NodeSpec{Taints: spec.Taints},
		Status: corev1.NodeStatus{
			Capacity:    list,
			Allocatable: list.DeepCopy(),
			Phase:       corev1.NodeRunning,
		},
	}
	return c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
}

// WaitNodeReady waits until the node's Ready condition is True (kwok's
// node-initialize stage), for at most DefaultWaitTimeout.
func (c *Cluster) WaitNodeReady(ctx context.Context, name string) error {
	var last string
	err := c.poll(ctx, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s (%s)", cond.Status, cond.Reason)
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		last = "no Ready condition yet"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s not Ready: %w; last seen: %s", name, err, last)
	}
	return nil
}

// CreateNamespace creates a namespace (name ending in "-" is a generateName
// prefix) and waits until kube-controller-manager has created its "default"
// ServiceAccount, without which pods cannot be created.
func (c *Cluster) CreateNamespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	if name == "" || name[len(name)-1] == '-' {
		if name == "" {
			name = "corral-test-"
		}
		ns.GenerateName = name
	} else {
		ns.Name = name
	}
	created, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	if err := c.waitServiceAccount(ctx, created.Name, "default"); err != nil {
		return created, fmt.Errorf("namespace %s: default ServiceAccount not created: %w", created.Name, err)
	}
	return created, nil
}

// WaitPodPhase waits until the pod reaches phase, for at most
// DefaultWaitTimeout. It fails early if the pod reaches a different terminal
// phase.
func (c *Cluster) WaitPodPhase(ctx context.Context, namespace, name string, phase corev1.PodPhase) (*corev1.Pod, error) {
	var pod *corev1.Pod
	last := ""
	err := c.poll(ctx, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				last = "not found"
				return false, nil
			}
			last = err.Error()
			return false, nil
		}
		pod = p
		last = "phase=" + string(p.Status.Phase) + " node=" + p.Spec.NodeName
		if p.Status.Phase == phase {
			return true, nil
		}
		if (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) && phase != p.Status.Phase {
			return false, fmt.Errorf("pod %s/%s reached terminal phase %s", namespace, name, p.Status.Phase)
		}
		return false, nil
	})
	if err != nil {
		return pod, fmt.Errorf("pod %s/%s did not reach %s: %w; last seen: %s", namespace, name, phase, err, last)
	}
	return pod, nil
}

// poll runs cond every interval until it returns true or an error, ctx ends,
// or DefaultWaitTimeout passes. If a control-plane component has died, it
// says so instead of waiting for the timeout.
func (c *Cluster) poll(ctx context.Context, interval time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, DefaultWaitTimeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		done, err := cond(ctx)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if err := c.checkAlive(); err != nil {
			return fmt.Errorf("control plane component died: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// GPUQuantity is a convenience for resource lists: "nvidia.com/gpu": n.
func GPUQuantity(n int) corev1.ResourceList {
	return corev1.ResourceList{GPUResource: resource.MustParse(strconv.Itoa(n))}
}
