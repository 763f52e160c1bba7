package kube

import (
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// unbindable says why a pod must not be bound now ("" when it may), read
// from the informers right before its binding is sent. The cycle's
// snapshot may be older than a deletion: a JobSet deleted while its gang
// waited was seen in the snapshot, its pods live on until the garbage
// collector reaches them, and binding them then starts work nobody wants
// (and holds GPUs from the gangs that are wanted). The pod itself: gone,
// replaced under its name, or being deleted. Its owners: the Job that
// controls it, that Job's JobSet, its LeaderWorkerSet, its RayCluster:
// gone, replaced (another UID), or being deleted.
func (c *Cache) unbindable(p *corev1.Pod) string {
	if c.pods == nil || c.jobs == nil {
		return "" // a Cache without informers (tests of the write path)
	}
	key := p.Namespace + "/" + p.Name
	obj, ok, _ := c.pods.GetStore().GetByKey(key)
	if !ok {
		return fmt.Sprintf("pod %s was deleted", key)
	}
	cur := obj.(*corev1.Pod)
	if cur.UID != p.UID {
		return fmt.Sprintf("pod %s was deleted and created again", key)
	}
	if cur.DeletionTimestamp != nil {
		return fmt.Sprintf("pod %s is being deleted", key)
	}
	ov := c.ownerStores()
	for _, o := range cur.OwnerReferences {
		if o.Controller == nil || !*o.Controller {
			continue
		}
		switch {
		case o.Kind == "Job" && strings.HasPrefix(o.APIVersion, "batch/"):
			jobObj, why := ownerState(ov.jobs, "Job", cur.Namespace, o)
			if why != "" {
				return why
			}
			if job, ok := jobObj.(*batchv1.Job); ok {
				for _, jo := range job.OwnerReferences {
					if jo.Controller != nil && *jo.Controller && jo.Kind == "JobSet" && ov.jobSets != nil {
						if _, why := ownerState(ov.jobSets, "JobSet", cur.Namespace, jo); why != "" {
							return why
						}
					}
				}
			}
		case o.Kind == "RayCluster" && ov.rayClusters != nil:
			if _, why := ownerState(ov.rayClusters, "RayCluster", cur.Namespace, o); why != "" {
				return why
			}
		}
	}
	// Owners named by the controllers' labels: the JobSet of a pod whose Job
	// the informer has not shown yet, the LeaderWorkerSet above the pod's
	// StatefulSet (corral does not read StatefulSets).
	if js := cur.Labels[jobSetNameLabel]; js != "" && ov.jobSets != nil {
		if _, why := ownerState(ov.jobSets, "JobSet", cur.Namespace, metav1.OwnerReference{Name: js}); why != "" {
			return why
		}
	}
	if lws := cur.Labels[lwsNameLabel]; lws != "" && ov.lwss != nil {
		if _, why := ownerState(ov.lwss, "LeaderWorkerSet", cur.Namespace, metav1.OwnerReference{Name: lws}); why != "" {
			return why
		}
	}
	return ""
}

// ownerState reads the owner o names from store and says why it no longer
// wants its pods, if so: gone, another object under its name (when o
// carries a UID), or being deleted.
func ownerState(store cache.Store, kind, ns string, o metav1.OwnerReference) (any, string) {
	obj, ok, _ := store.GetByKey(ns + "/" + o.Name)
	if !ok {
		return nil, fmt.Sprintf("its %s %s/%s was deleted", kind, ns, o.Name)
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return obj, ""
	}
	if o.UID != "" && m.GetUID() != o.UID {
		return obj, fmt.Sprintf("its %s %s/%s was deleted and created again", kind, ns, o.Name)
	}
	if m.GetDeletionTimestamp() != nil {
		return obj, fmt.Sprintf("its %s %s/%s is being deleted", kind, ns, o.Name)
	}
	return obj, ""
}
