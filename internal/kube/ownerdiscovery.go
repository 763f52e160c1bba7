package kube

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// ownerRediscoverEvery is how often discovery is asked again for the owner
// resources that were not served (JobSet, LeaderWorkerSet, RayCluster CRDs
// installed after corral started): one small discovery request per missing
// group-version. Until then such pods wait with "the gang's size is
// unknown", so a short period matters more than the requests.
const ownerRediscoverEvery = 10 * time.Second

// ownerInformer is the informer of an owner resource, nil while it is not
// served.
func (c *Cache) ownerInformer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	c.ownerMu.RLock()
	defer c.ownerMu.RUnlock()
	return c.ownerInformers[gvr]
}

// ownerStores is the owners' view: the Jobs, and each controller's objects
// whose resource is served and synced (nil store otherwise).
func (c *Cache) ownerStores() *ownerView {
	ov := &ownerView{jobs: c.jobs.GetStore()}
	if inf := c.ownerInformer(jobSetGVR); inf != nil {
		ov.jobSets = inf.GetStore()
	}
	if inf := c.ownerInformer(lwsGVR); inf != nil {
		ov.lwss = inf.GetStore()
	}
	if inf := c.ownerInformer(rayClusterGVR); inf != nil {
		ov.rayClusters = inf.GetStore()
	}
	return ov
}

// discoverOwners asks discovery, every period until ctx ends, for the
// owner resources not served yet, and starts reading each one that now
// is. A store joins the owners' view only once its first list is in: a
// half-filled store would make owners look deleted.
func (c *Cache) discoverOwners(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if c.addServedOwners(ctx) {
			c.Wake()
		}
	}
}

// addServedOwners starts the informers of the owner resources served now
// and waits for their first lists; it reports whether any was added.
func (c *Cache) addServedOwners(ctx context.Context) bool {
	var fresh []schema.GroupVersionResource
	for _, gvr := range ownerGVRs {
		if c.ownerInformer(gvr) == nil && c.servedNow(gvr) {
			fresh = append(fresh, gvr)
		}
	}
	if len(fresh) == 0 {
		return false
	}
	added := map[schema.GroupVersionResource]cache.SharedIndexInformer{}
	for _, gvr := range fresh {
		inf := c.dynF.ForResource(gvr).Informer()
		if err := c.wakeOnChange(inf); err != nil {
			continue
		}
		added[gvr] = inf
	}
	c.dynF.Start(ctx.Done())
	for gvr, inf := range added {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return false
		}
		c.ownerMu.Lock()
		c.ownerInformers[gvr] = inf
		c.ownerMu.Unlock()
	}
	return len(added) > 0
}
