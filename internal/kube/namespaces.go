package kube

import corev1 "k8s.io/api/core/v1"

// listNamespaces is the informer's namespaces (for their labels: a pod
// (anti-)affinity term's namespaceSelector matches them).
func (c *Cache) listNamespaces() []*corev1.Namespace {
	var out []*corev1.Namespace
	for _, o := range c.namespaces.GetStore().List() {
		out = append(out, o.(*corev1.Namespace))
	}
	return out
}
