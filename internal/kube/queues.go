package kube

import (
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cycle"
)

// anyGPU is the queue resource a Queue's GPU resource (nvidia.com/gpu)
// maps to while the cluster has no GPU yet: nothing is charged to it. With
// one GPU model it maps to gpu/<model>; with several, it is ambiguous.
const anyGPU cycle.Resource = "gpu"

// maxQueueAmount bounds a quantity in a Queue (in its user unit), so that
// the engine's milli and MiB units cannot overflow int64.
var maxQueueAmount = resource.MustParse("1e12")

// queueSet is what the adapter reads from the Queue objects in one cycle.
// It only converts them: the engine builds the tree, admits jobs into it
// (a job's queue label, else its namespace's default, defaultForNamespaces
// included) and reports each queue's problems, once, for both drivers.
type queueSet struct {
	// specs go into Snapshot.Queues: every Queue object, those the adapter
	// could not convert with their Problem (the engine leaves them, and the
	// queues below them, out with that reason).
	specs []cycle.QueueSpec
	// names lists every Queue object, sorted.
	names []string
}

// enabled reports whether queues are in force: once an admin has created a
// Queue, every pod must get into one.
func (qs *queueSet) enabled() bool { return qs != nil && len(qs.names) > 0 }

// newQueueSet converts Queue objects into the engine's specs. It never
// fails: a value it cannot convert becomes the spec's Problem.
//
// unreadable maps a Queue the informer holds but which does not decode (a
// malformed quantity) to the decoding error; objs holds its name and parent.
//
// models lists the cluster's GPU models: the scheduler's GPU resource
// (nvidia.com/gpu) in a Queue means GPUs of the cluster's one model.
func newQueueSet(objs []*v1alpha1.Queue, unreadable map[string]string, gpuResource string, models []string) *queueSet {
	qs := &queueSet{}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Name < objs[j].Name })
	for _, o := range objs {
		qs.names = append(qs.names, o.Name)
		s, probs := queueSpec(o, gpuResource, models)
		if why, bad := unreadable[o.Name]; bad {
			probs = append([]string{why}, probs...)
		}
		s.DefaultFor = append([]string(nil), o.Spec.DefaultForNamespaces...)
		s.Problem = strings.Join(probs, "; ")
		qs.specs = append(qs.specs, s)
	}
	return qs
}

// queueSpec converts one Queue. Values the API server's validation should
// have refused (where it was bypassed: an older CRD, a file) are problems,
// never panics.
func queueSpec(o *v1alpha1.Queue, gpuResource string, models []string) (cycle.QueueSpec, []string) {
	var probs []string
	s := cycle.QueueSpec{
		Name:       o.Name,
		Parent:     o.Spec.Parent,
		Priority:   o.Spec.Priority,
		Namespaces: append([]string(nil), o.Spec.Namespaces...),
	}
	if s.Parent == o.Name {
		probs = append(probs, "a queue cannot be its own parent")
	}
	switch o.Spec.ReclaimPolicy {
	case "", v1alpha1.ReclaimNever:
	case v1alpha1.ReclaimPreempt:
		s.Reclaim = true
	case v1alpha1.ReclaimStrict:
		s.Reclaim, s.StrictReclaim = true, true
	default:
		probs = append(probs, fmt.Sprintf("reclaimPolicy %q: want Never, Preempt or Strict", o.Spec.ReclaimPolicy))
	}
	if w := o.Spec.Weight; w != nil {
		f, err := weightOf(*w)
		if err != nil {
			probs = append(probs, "weight: "+err.Error())
		} else {
			s.Weight = map[cycle.Resource]float64{cycle.AllResources: f}
		}
	}
	if len(o.Spec.Namespaces) > 0 {
		for _, ns := range o.Spec.DefaultForNamespaces {
			if !hasString(o.Spec.Namespaces, ns) {
				probs = append(probs, fmt.Sprintf("defaultForNamespaces lists %q, which namespaces does not admit", ns))
			}
		}
	}
	seen := map[cycle.Resource]string{}
	for _, qr := range o.Spec.Resources {
		r, unit, err := queueResource(qr.Name, gpuResource, models)
		if err != nil {
			probs = append(probs, fmt.Sprintf("resource %q: %v", qr.Name, err))
			continue
		}
		if prev, dup := seen[r]; dup {
			probs = append(probs, fmt.Sprintf("resources %q and %q name the same resource", prev, qr.Name))
			continue
		}
		seen[r] = qr.Name
		for _, f := range []struct {
			what string
			q    *resource.Quantity
			dst  *cycle.Amounts
		}{{"guaranteed", qr.Guaranteed, &s.Guarantee}, {"limit", qr.Limit, &s.Limit}} {
			if f.q == nil {
				continue
			}
			v, err := unit.amount(*f.q)
			if err != nil {
				probs = append(probs, fmt.Sprintf("resource %q %s %s: %v", qr.Name, f.what, f.q.String(), err))
				continue
			}
			if *f.dst == nil {
				*f.dst = cycle.Amounts{}
			}
			(*f.dst)[r] = v
		}
		if qr.Weight != nil {
			w, err := weightOf(*qr.Weight)
			if err != nil {
				probs = append(probs, fmt.Sprintf("resource %q weight: %v", qr.Name, err))
				continue
			}
			if s.Weight == nil {
				s.Weight = map[cycle.Resource]float64{}
			}
			s.Weight[r] = w
		}
	}
	return s, probs
}

func weightOf(q resource.Quantity) (float64, error) {
	f := q.AsApproximateFloat64()
	if f <= 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s must be a positive number", q.String())
	}
	return f, nil
}

// unit is how a resource's quantities become the engine's integers.
type unit uint8

const (
	unitMilli  unit = iota // cpu and GPUs: milli
	unitMiB                // memory: MiB, rounded up as pod requests are
	unitDevice             // extended resources, DRA device classes: whole devices
)

func (u unit) amount(q resource.Quantity) (int64, error) {
	if q.Sign() < 0 {
		return 0, fmt.Errorf("must not be negative")
	}
	if q.Cmp(maxQueueAmount) > 0 {
		return 0, fmt.Errorf("above the largest supported amount %s", maxQueueAmount.String())
	}
	switch u {
	case unitMilli:
		return q.MilliValue(), nil
	case unitMiB:
		return (q.Value() + (1 << 20) - 1) >> 20, nil
	default:
		if q.MilliValue()%1000 != 0 {
			return 0, fmt.Errorf("must be a whole number of devices")
		}
		return q.Value(), nil
	}
}

// quantity renders an engine amount back in the user's unit.
func (u unit) quantity(v int64) resource.Quantity {
	switch u {
	case unitMilli:
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	case unitMiB:
		return *resource.NewQuantity(v<<20, resource.BinarySI)
	default:
		return *resource.NewQuantity(v, resource.DecimalSI)
	}
}

// queueResource maps a Queue's resource name to the engine's name and unit.
// The engine charges GPUs per model, so the scheduler's GPU resource is
// the cluster's one model, and ambiguous when there are several.
func queueResource(name, gpuResource string, models []string) (cycle.Resource, unit, error) {
	switch {
	case name == "" || name == string(cycle.AllResources):
		return "", 0, fmt.Errorf("not a resource name")
	case name == string(corev1.ResourceCPU):
		return cycle.CPU, unitMilli, nil
	case name == string(corev1.ResourceMemory):
		return cycle.Memory, unitMiB, nil
	case name == gpuResource:
		switch len(models) {
		case 0:
			return anyGPU, unitMilli, nil
		case 1:
			return cycle.GPU(models[0]), unitMilli, nil
		}
		return "", 0, fmt.Errorf("the cluster has GPUs of %d models (%s): give the quota per model, as gpu/<model>",
			len(models), strings.Join(models, ", "))
	case strings.HasPrefix(name, "gpu/"):
		model := strings.TrimPrefix(name, "gpu/")
		if model == "" || strings.Contains(model, "/") {
			return "", 0, fmt.Errorf("want gpu/<model>, e.g. gpu/H100")
		}
		return cycle.GPU(model), unitMilli, nil
	case name == string(anyGPU):
		return "", 0, fmt.Errorf("GPUs of any model are spelled %q", gpuResource)
	}
	return cycle.Resource(name), unitDevice, nil
}

// resourceList renders engine amounts for a Queue's status, with the names
// and units users write in spec.resources. Zero amounts are left out. The
// GPU resource (nvidia.com/gpu) is the total over every model: the engine
// charges GPUs per model (gpu/H100), which stay listed, but kubectl's
// printer columns and `corral queues` read the total, and a queue written
// with nvidia.com/gpu on a one-model cluster is charged as gpu/<model>.
func resourceList(a cycle.Amounts, gpuResource string) corev1.ResourceList {
	if len(a) == 0 {
		return nil
	}
	out := corev1.ResourceList{}
	var gpuTotal int64
	for r, v := range a {
		if r == anyGPU || strings.HasPrefix(string(r), "gpu/") {
			gpuTotal += v
		}
	}
	if gpuTotal != 0 {
		out[corev1.ResourceName(gpuResource)] = unitMilli.quantity(gpuTotal)
	}
	for _, r := range a.Resources() {
		v := a[r]
		if v == 0 {
			continue
		}
		name, u := string(r), unitDevice
		switch {
		case r == cycle.CPU:
			u = unitMilli
		case r == cycle.Memory:
			u = unitMiB
		case r == anyGPU:
			continue // in the total above
		case strings.HasPrefix(string(r), "gpu/"):
			u = unitMilli
		}
		out[corev1.ResourceName(name)] = u.quantity(v)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
