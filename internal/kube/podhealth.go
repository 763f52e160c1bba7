package kube

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/corral-dev/corral/internal/cluster"
)

// Pods report the health of the devices they were given: the kubelet fills
// status.containerStatuses[].allocatedResourcesStatus (KEP-4680, feature
// gate ResourceHealthStatus) from what the device plugin or the DRA driver
// says. A device a pod reports Unhealthy is a failed device, the same as
// one a health agent names on the node.

// podDeviceHealthHold keeps a device reported unhealthy by a pod failed
// after the pod is gone (corral evicts it, and its report goes with it),
// unless a newer report says it is healthy again.
const podDeviceHealthHold = time.Hour

// podReport is one device's latest health as pods reported it.
type podReport struct {
	node, device string
	healthy      bool
	at           time.Time // when the reporting pod last changed state
	why          string
}

// podDeviceReports reads every pod's allocated-resources health: for each
// node device, the newest report. Device-plugin resources (gpuResource)
// name the plugin's device ID, matched to corral's device ids (the node's
// topology annotation ids; or, for a plugin using index ids, "3" for the
// fourth GPU); DRA resources ("claim:<claim>/<request>") name
// "<driver>/<pool>/<device>", matched on the driver corral schedules.
func podDeviceReports(pods []*corev1.Pod, st *cluster.State, gpuResource, draDriver string) []podReport {
	latest := map[string]podReport{}
	for _, p := range pods {
		if !reportsHealth(p) {
			continue // nearly every pod: nothing to read, nothing to look up
		}
		ni, ok := st.NodeIndex(p.Spec.NodeName)
		if p.Spec.NodeName == "" || !ok {
			continue
		}
		at := podChangedAt(p)
		for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			for _, rs := range cs.AllocatedResourcesStatus {
				for _, rh := range rs.Resources {
					id, ok := reportedDevice(st, ni, string(rs.Name), string(rh.ResourceID), gpuResource, draDriver)
					if !ok || rh.Health == corev1.ResourceHealthStatusUnknown {
						continue
					}
					r := podReport{node: p.Spec.NodeName, device: id, healthy: rh.Health == corev1.ResourceHealthStatusHealthy, at: at}
					if !r.healthy {
						r.why = fmt.Sprintf("pod %s/%s reports %s %s Unhealthy", p.Namespace, p.Name, rs.Name, rh.ResourceID)
						if rh.Message != nil && *rh.Message != "" {
							r.why += ": " + *rh.Message
						}
					}
					key := r.node + "/" + r.device
					if old, seen := latest[key]; !seen || r.at.After(old.at) || (r.at.Equal(old.at) && !r.healthy) {
						latest[key] = r
					}
				}
			}
		}
	}
	keys := make([]string, 0, len(latest))
	for k := range latest {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]podReport, 0, len(keys))
	for _, k := range keys {
		out = append(out, latest[k])
	}
	return out
}

// reportsHealth says whether any container of the pod reports the health
// of its allocated resources.
func reportsHealth(p *corev1.Pod) bool {
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			if len(cs.AllocatedResourcesStatus) > 0 {
				return true
			}
		}
	}
	return false
}

// reportedDevice maps a reported resource to a device id on node ni.
func reportedDevice(st *cluster.State, ni int, name, resourceID, gpuResource, draDriver string) (string, bool) {
	devs := st.Node(ni).Devices
	if strings.HasPrefix(name, "claim:") {
		driver, rest, ok := strings.Cut(resourceID, "/")
		i := strings.LastIndex(rest, "/")
		if !ok || driver != draDriver || i < 0 {
			return "", false
		}
		device := rest[i+1:]
		for _, d := range devs {
			if d.ID == device {
				return d.ID, true
			}
		}
		return "", false
	}
	if name != gpuResource {
		return "", false
	}
	for _, d := range devs {
		if d.ID == resourceID {
			return d.ID, true
		}
	}
	if k, err := strconv.Atoi(resourceID); err == nil && k >= 0 && k < len(devs) {
		return devs[k].ID, true
	}
	return "", false
}

// podChangedAt is the latest transition the pod's status records.
func podChangedAt(p *corev1.Pod) time.Time {
	at := p.CreationTimestamp.Time
	for _, c := range p.Status.Conditions {
		if c.LastTransitionTime.After(at) {
			at = c.LastTransitionTime.Time
		}
	}
	return at
}

// podHealth remembers devices pods reported unhealthy, past the pods.
type podHealth struct {
	bad map[string]podReport // "node/device" -> the Unhealthy report
	// lastSeen is when a pod last showed the report, for the hold.
	lastSeen map[string]time.Time
}

// update folds this cycle's reports in and returns the devices to treat as
// failed now, in key order: reported Unhealthy now, or within the hold
// since, unless a newer report says healthy.
func (h *podHealth) update(reports []podReport, now time.Time) []podReport {
	if h.bad == nil {
		h.bad, h.lastSeen = map[string]podReport{}, map[string]time.Time{}
	}
	for _, r := range reports {
		key := r.node + "/" + r.device
		if r.healthy {
			if old, ok := h.bad[key]; ok && !r.at.Before(old.at) {
				delete(h.bad, key)
				delete(h.lastSeen, key)
			}
			continue
		}
		h.bad[key] = r
		h.lastSeen[key] = now
	}
	keys := make([]string, 0, len(h.bad))
	for k := range h.bad {
		if now.Sub(h.lastSeen[k]) > podDeviceHealthHold {
			delete(h.bad, k)
			delete(h.lastSeen, k)
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]podReport, 0, len(keys))
	for _, k := range keys {
		out = append(out, h.bad[k])
	}
	return out
}
