package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/mig"
	"github.com/corral-dev/corral/internal/workload"
)

// MIG on the extended-resource path (the NVIDIA device plugin's "mixed"
// strategy): a node advertises nvidia.com/mig-<profile> counts, a pod asks
// for one nvidia.com/mig-<profile>. Counts do not say which GPU holds which
// instance, so a node may describe its layout exactly in the
// corral.dev/mig-layout annotation (its MIG manager or an admin keeps it
// true); without it corral packs the advertised instances onto as few GPUs
// as the geometry allows (ids mig0, mig1, ...), plus idle MIG GPUs up to
// GPU Feature Discovery's nvidia.com/gpu.count.
//
// Re-partitions the engine plans are written to the node annotation
// corral.dev/mig-layout-wanted (GPU id -> layout), not to mig-parted's
// nvidia.com/mig.config label: that label selects one named configuration
// for the whole node, and switching it re-partitions every GPU of the node,
// busy ones included, while corral re-partitions single idle GPUs into
// layouts no configuration file names. A node agent applies the wanted
// layout (nvidia-smi mig -cgi/-cci, or a per-device mig-parted config) and
// updates corral.dev/mig-layout; until the layouts agree, the GPU counts as
// waiting for its re-partition and nothing is bound to it.

// migGeometry finds the node's MIG geometry from its product label, then
// corral's model label.
func migGeometry(n *corev1.Node) (mig.Model, bool) {
	for _, l := range []string{v1alpha1.LabelGFDProduct, v1alpha1.LabelGPUModel} {
		if v := n.Labels[l]; v != "" {
			if g, ok := mig.Lookup(v); ok {
				return g, true
			}
		}
	}
	return mig.Model{}, false
}

// migAdvertised reads the node's allocatable MIG instances per profile.
func migAdvertised(n *corev1.Node) map[string]int {
	out := map[string]int{}
	for name, q := range n.Status.Allocatable {
		if p, ok := strings.CutPrefix(string(name), v1alpha1.ResourceMIGPrefix); ok && q.Value() > 0 {
			out[p] = int(min(q.Value(), 64))
		}
	}
	return out
}

// parseLayout reads "3g.40gb@0,3g.40gb@4".
func parseLayout(s string) (mig.Layout, error) { return mig.ParseLayout(s) }

// formatLayout writes a layout as parseLayout reads it, by start.
func formatLayout(l mig.Layout) string {
	parts := make([]string, len(l))
	for i, in := range sortedLayout(l) {
		parts[i] = in.String()
	}
	return strings.Join(parts, ",")
}

func sortedLayout(l mig.Layout) mig.Layout {
	out := append(mig.Layout(nil), l...)
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

// readLayouts parses a GPU id -> layout annotation.
func readLayouts(raw string) (map[string]mig.Layout, error) {
	var m map[string]string
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, err
	}
	out := make(map[string]mig.Layout, len(m))
	for id, v := range m {
		l, err := parseLayout(v)
		if err != nil {
			return nil, fmt.Errorf("GPU %s: %w", id, err)
		}
		out[id] = l
	}
	return out, nil
}

// maxMIGGPUs bounds the MIG GPUs read from one node, as the extended
// resource's count is bounded for whole GPUs.
const maxMIGGPUs = 256

// migDevices reads a node's MIG GPUs. taken holds the ids of its other
// GPUs; a MIG GPU may not reuse one.
func migDevices(n *corev1.Node, model string, memMiB int64, whole int, taken map[string]bool) ([]cluster.Device, []string) {
	advertised := migAdvertised(n)
	raw := n.Annotations[v1alpha1.AnnotationMIGLayout]
	if len(advertised) == 0 && raw == "" {
		return nil, nil
	}
	geom, ok := migGeometry(n)
	if !ok {
		return nil, []string{fmt.Sprintf("advertises MIG instances but its GPU product %q is not a MIG product corral knows (A100 40/80GB, H100 80GB, H200)",
			n.Labels[v1alpha1.LabelGFDProduct])}
	}
	var warnings []string
	layouts := map[string]mig.Layout{}
	if raw != "" {
		var err error
		if layouts, err = readLayouts(raw); err != nil {
			return nil, []string{fmt.Sprintf("annotation %s: %v", v1alpha1.AnnotationMIGLayout, err)}
		}
	} else {
		layouts = packAdvertised(geom, advertised)
		if c, err := strconv.Atoi(n.Labels[v1alpha1.LabelGFDCount]); err == nil {
			for i := len(layouts); i < min(c-whole, maxMIGGPUs); i++ {
				layouts[fmt.Sprintf("mig%d", i)] = mig.Layout{}
			}
		}
	}
	wanted := map[string]mig.Layout{}
	if w := n.Annotations[v1alpha1.AnnotationMIGLayoutWanted]; w != "" {
		var err error
		if wanted, err = readLayouts(w); err != nil {
			warnings = append(warnings, fmt.Sprintf("annotation %s: %v", v1alpha1.AnnotationMIGLayoutWanted, err))
		}
	}
	ids := make([]string, 0, len(layouts))
	for id := range layouts {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return devNameLess(ids[i], ids[j]) })
	if len(ids) > maxMIGGPUs {
		warnings = append(warnings, fmt.Sprintf("%d MIG GPUs listed; only the first %d are used", len(ids), maxMIGGPUs))
		ids = ids[:maxMIGGPUs]
	}
	bad := map[string]bool{}
	for _, id := range strings.Split(n.Annotations[v1alpha1.AnnotationUnhealthyGPUs], ",") {
		bad[strings.TrimSpace(id)] = true
	}
	var out []cluster.Device
	for i, id := range ids {
		if id == "" {
			warnings = append(warnings, "a MIG GPU without an id; left out")
			continue
		}
		if taken[id] {
			warnings = append(warnings, fmt.Sprintf("MIG GPU %s has the id of a GPU not in MIG mode; left out", id))
			continue
		}
		d := cluster.Device{ID: id, Model: model, MemMiB: memMiB, NVLink: -1, PCIeSwitch: min(whole+i, cluster.MaxCoordinate),
			MIG: geom.Name, MIGLayout: layouts[id], Unhealthy: bad[id]}
		if err := geom.Validate(d.MIGLayout); err != nil {
			warnings = append(warnings, fmt.Sprintf("MIG GPU %s: %v; left out", id, err))
			continue
		}
		if w, ok := wanted[id]; ok && formatLayout(w) != formatLayout(d.MIGLayout) {
			if err := geom.Validate(w); err == nil {
				d.MIGPending, d.MIGWanted = true, w
			}
		}
		out = append(out, d)
	}
	return out, warnings
}

// packAdvertised lays the advertised instances out on as few GPUs as it
// can, largest profiles first, each where mig.Place puts it.
func packAdvertised(geom mig.Model, advertised map[string]int) map[string]mig.Layout {
	var todo []mig.Profile
	for _, p := range geom.Profiles {
		for range advertised[p.Name] {
			todo = append(todo, p)
		}
	}
	sort.SliceStable(todo, func(i, j int) bool { return todo[i].Memory > todo[j].Memory })
	var gpus []mig.Layout
	for _, p := range todo {
		placed := false
		for g := range gpus {
			if st, ok := geom.Place(gpus[g], p.Name); ok {
				gpus[g] = append(gpus[g], mig.Instance{Profile: p.Name, Start: st})
				placed = true
				break
			}
		}
		if !placed {
			st, _ := geom.Place(nil, p.Name)
			gpus = append(gpus, mig.Layout{{Profile: p.Name, Start: st}})
		}
	}
	out := make(map[string]mig.Layout, len(gpus))
	for i, l := range gpus {
		out[fmt.Sprintf("mig%d", i)] = sortedLayout(l)
	}
	return out
}

// gpuMemory reads GPU Feature Discovery's memory label (MiB), 0 if absent.
func gpuMemory(n *corev1.Node) int64 {
	v, err := strconv.ParseInt(n.Labels[v1alpha1.LabelGFDMemory], 10, 64)
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// migRequest reads the pod's nvidia.com/mig-<profile> requests: one
// instance of one profile per pod.
func migRequest(p *corev1.Pod) (profile string, count int64, err error) {
	per := map[string]int64{}
	add := func(res corev1.ResourceRequirements, peak bool) {
		for name, q := range res.Limits {
			if prof, ok := strings.CutPrefix(string(name), v1alpha1.ResourceMIGPrefix); ok {
				if peak {
					per[prof] = max(per[prof], q.Value())
				} else {
					per[prof] += q.Value()
				}
			}
		}
	}
	for _, c := range p.Spec.Containers {
		add(c.Resources, false)
	}
	for _, c := range p.Spec.InitContainers {
		add(c.Resources, true)
	}
	var profiles []string
	for prof, n := range per {
		if n > 0 {
			profiles = append(profiles, prof)
			count += n
		}
	}
	sort.Strings(profiles)
	switch {
	case len(profiles) == 0:
		return "", 0, nil
	case len(profiles) > 1:
		return "", count, fmt.Errorf("the pod asks for MIG instances of %d profiles (%s); corral places one instance per pod",
			len(profiles), strings.Join(profiles, ", "))
	case count > 1:
		return "", count, fmt.Errorf("the pod asks for %d instances of %s%s; corral places one instance per pod",
			count, v1alpha1.ResourceMIGPrefix, profiles[0])
	}
	return profiles[0], 1, nil
}

// maxGPUMemory bounds the gpu-memory annotation far above any GPU's memory.
var maxGPUMemory = resource.MustParse("1Pi")

// memoryShare reads the corral.dev/gpu-memory annotation in MiB (rounded up).
func memoryShare(p *corev1.Pod) (int64, error) {
	v := p.Annotations[v1alpha1.AnnotationGPUMemory]
	if v == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(v)
	// Past int64 bytes Value() wraps to 0 or a negative number: bounded
	// here, a huge share is refused rather than silently dropped.
	if err != nil || q.Sign() <= 0 || q.Cmp(maxGPUMemory) > 0 {
		return 0, fmt.Errorf("annotation %s=%q: want a positive quantity of GPU memory such as 10Gi, at most %s",
			v1alpha1.AnnotationGPUMemory, v, maxGPUMemory.String())
	}
	return (q.Value() + (1 << 20) - 1) >> 20, nil
}

// sharedGPURequest adds the pod's MIG instance or memory share to r.
func sharedGPURequest(p *corev1.Pod, r *workload.Request) error {
	profile, _, err := migRequest(p)
	if err != nil {
		return err
	}
	mem, err := memoryShare(p)
	if err != nil {
		return err
	}
	if profile != "" {
		if r.GPUs > 0 || r.GPUMilli > 0 || mem > 0 {
			return fmt.Errorf("the pod asks for a MIG instance (%s) and other GPUs or a GPU share: ask one", profile)
		}
		r.GPUs, r.MIGProfile = 1, profile
	}
	if mem > 0 {
		if r.GPUMilli > 0 {
			return fmt.Errorf("annotations %s and %s both ask for a share of one GPU: use one", v1alpha1.AnnotationGPUMemory, v1alpha1.AnnotationGPUMilli)
		}
		if r.GPUs > 1 {
			return fmt.Errorf("annotation %s asks for a share of one GPU but the pod requests %d GPUs", v1alpha1.AnnotationGPUMemory, r.GPUs)
		}
		r.GPUs, r.GPUMemMiB = 1, mem
	}
	return nil
}

// assignedMIG formats the binding annotation of a pod's MIG instances on
// node n.
func assignedMIG(s *cluster.State, n int, shares []cluster.DeviceShare) string {
	var parts []string
	for _, d := range shares {
		if d.MIG.IsSet() {
			parts = append(parts, s.Node(n).Devices[d.Device].ID+":"+s.MIGInstance(n, d.Device, d.MIG).String())
		}
	}
	return strings.Join(parts, ",")
}

// migShares reads a bound pod's corral.dev/assigned-mig annotation back.
func migShares(s *cluster.State, n int, raw string, milli int32) []cluster.DeviceShare {
	var out []cluster.DeviceShare
	for _, f := range strings.Split(raw, ",") {
		id, inst, ok := strings.Cut(strings.TrimSpace(f), ":")
		if !ok {
			continue
		}
		k := deviceIndex(s.Node(n), id)
		l, err := parseLayout(inst)
		if k < 0 || err != nil || len(l) != 1 {
			continue
		}
		if ref, ok := s.MIGRef(n, k, l[0]); ok {
			out = append(out, cluster.DeviceShare{Device: k, Milli: milli, MIG: ref})
		}
	}
	return out
}

// firstFreeMIG is the instance a pod of another scheduler (or one bound
// before corral recorded it) is counted on: the lowest free instance of its
// profile, as the device plugin hands them out.
func firstFreeMIG(s *cluster.State, n int, profile string, milli int32) []cluster.DeviceShare {
	for k := range s.Node(n).Devices {
		if i := s.MIGFreeInstance(n, k, profile); i >= 0 && !s.MIGPending(n, k) {
			if ref, ok := s.MIGRef(n, k, s.MIGLayout(n, k)[i]); ok {
				return []cluster.DeviceShare{{Device: k, Milli: milli, MIG: ref}}
			}
		}
	}
	return nil
}

// repartition records the plan's re-partitions on their nodes for the nodes'
// MIG managers: each GPU's wanted layout is merged into the node's
// corral.dev/mig-layout-wanted annotation.
func (b *binder) repartition(ctx context.Context, rps []engine.Repartition) error {
	byNode := map[string][]engine.Repartition{}
	var nodes []string
	for _, rp := range rps {
		if _, ok := byNode[rp.Node]; !ok {
			nodes = append(nodes, rp.Node)
		}
		byNode[rp.Node] = append(byNode[rp.Node], rp)
	}
	sort.Strings(nodes)
	for _, name := range nodes {
		n, err := b.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
		want := map[string]string{}
		if raw := n.Annotations[v1alpha1.AnnotationMIGLayoutWanted]; raw != "" {
			_ = json.Unmarshal([]byte(raw), &want) // a broken value is replaced
		}
		for _, rp := range byNode[name] {
			want[rp.Device] = formatLayout(rp.Layout)
		}
		val, err := json.Marshal(want)
		if err != nil {
			return err
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			v1alpha1.AnnotationMIGLayoutWanted: string(val)}}})
		if err != nil {
			return err
		}
		if _, err := b.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("node %s: recording MIG re-partition: %w", name, err)
		}
	}
	return nil
}
