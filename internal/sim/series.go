package sim

import (
	"sort"
	"time"

	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/metrics"
)

// maxHeatDomains bounds the domains whose allocation is sampled at every
// event: a heat map of more rows than a screen has pixels says nothing more.
const maxHeatDomains = 512

// sampleReport records the series the HTML report draws beside
// utilization: jobs waiting, GPUs per queue, and allocation per domain of
// the narrowest topology level above the host.
func (r *replay) sampleReport(now time.Time) {
	x := now.Sub(r.first).Hours()
	s := &r.res.Series
	s.Pending = append(s.Pending, metrics.Point{X: x, Y: float64(len(r.pending))})
	if r.fair != nil {
		held := map[string]int64{}
		for _, i := range r.running {
			jr := r.jobs[i]
			for _, b := range jr.bound {
				held[jr.job.Queue] += b.Alloc.GPUMilli()
			}
		}
		if s.QueueGPUs == nil {
			s.QueueGPUs = map[string][]metrics.Point{}
		}
		// Every leaf at every sample, in name order: a queue with nothing
		// running is at 0, not missing.
		leaves := make([]string, 0, len(r.fair.leaves))
		for q := range r.fair.leaves {
			leaves = append(leaves, q)
		}
		sort.Strings(leaves)
		for _, q := range leaves {
			s.QueueGPUs[q] = append(s.QueueGPUs[q], metrics.Point{X: x, Y: pct(held[q], r.capacity)})
		}
	}
	level := r.state.HostLevel() - 1
	if level < 1 || len(r.state.DomainsAt(level)) > maxHeatDomains {
		return // no level between the cluster and the host, or too many domains
	}
	if s.Domains == nil {
		s.Domains = &metrics.DomainSeries{Level: r.state.Levels()[level]}
		for _, d := range r.state.DomainsAt(level) {
			s.Domains.Names = append(s.Domains.Names, r.state.Domain(d).Name)
		}
	}
	row := make([]float64, 0, len(s.Domains.Names))
	for _, d := range r.state.DomainsAt(level) {
		capacity := int64(r.state.DomainCapacityGPUs(d, cluster.AllModels)) * 1000
		row = append(row, pct(capacity-r.state.DomainFreeMilli(d, cluster.AllModels), capacity))
	}
	s.Domains.Hours = append(s.Domains.Hours, x)
	s.Domains.Alloc = append(s.Domains.Alloc, row)
}
