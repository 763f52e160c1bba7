package kube

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Read-only helpers for tools that show the cluster as the scheduler sees it
// (corral jobs / queues / nodes) without running it. They wrap the
// adapter's own rules, so that the CLI and the scheduler cannot disagree on
// which gang a pod is in or which model a node has.

// JobOf names the job (gang) a pod belongs to: a key unique in the cluster
// ("job/ns/name", "podgroup/ns/name", "pod/ns/name", ...), the kind of
// object that defines the gang and that object's name.
func JobOf(p *corev1.Pod) (key, kind, name string) { return gangKey(p) }

// BoundAt is when the pod was bound (its PodScheduled=True transition, else
// its start); zero if neither is known.
func BoundAt(p *corev1.Pod) time.Time { return boundAt(p) }

// NodeModel is the GPU model the scheduler reads from a node's labels
// ("gpu" when none is set).
func NodeModel(n *corev1.Node) string { return nodeModel(n) }
