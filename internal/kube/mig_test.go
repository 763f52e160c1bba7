package kube

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

func migNode(product string, res map[string]int64, ann map[string]string) *corev1.Node {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi")}
	for k, v := range res {
		alloc[corev1.ResourceName(k)] = *resource.NewQuantity(v, resource.DecimalSI)
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: ann,
			Labels: map[string]string{v1alpha1.LabelGFDProduct: product, v1alpha1.LabelGFDMemory: "81920", v1alpha1.LabelGFDCount: "3"}},
		Status: corev1.NodeStatus{Allocatable: alloc,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

// migSummary renders a node's GPUs as "id:layout" ("*" marks a pending
// re-partition into the layout shown).
func migSummary(n cluster.Node) []string {
	var out []string
	for _, d := range n.Devices {
		switch {
		case d.MIGPending:
			out = append(out, d.ID+":*"+formatLayout(d.MIGWanted))
		case d.MIG != "":
			out = append(out, d.ID+":"+formatLayout(d.MIGLayout))
		default:
			out = append(out, d.ID)
		}
	}
	return out
}

func TestMIGNodes(t *testing.T) {
	cases := map[string]struct {
		node *corev1.Node
		want []string
		warn string
	}{
		"instances packed from the advertised counts, idle GPUs up to gpu.count": {
			node: migNode("NVIDIA-A100-SXM4-80GB", map[string]int64{"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-3g.40gb": 1}, nil),
			want: []string{"gpu0", "mig0:1g.10gb@0,1g.10gb@1,3g.40gb@4", "mig1:"},
		},
		"the layout annotation is exact": {
			node: migNode("NVIDIA H100 80GB HBM3", map[string]int64{"nvidia.com/mig-1g.10gb": 1},
				map[string]string{v1alpha1.AnnotationMIGLayout: `{"gpu3":"1g.10gb@6","gpu1":""}`}),
			want: []string{"gpu1:", "gpu3:1g.10gb@6"},
		},
		"a wanted layout the node does not report yet is pending": {
			node: migNode("NVIDIA H100 80GB HBM3", nil, map[string]string{
				v1alpha1.AnnotationMIGLayout:       `{"gpu0":"","gpu1":"7g.80gb@0"}`,
				v1alpha1.AnnotationMIGLayoutWanted: `{"gpu0":"3g.40gb@0,3g.40gb@4","gpu1":"7g.80gb@0"}`}),
			want: []string{"gpu0:*3g.40gb@0,3g.40gb@4", "gpu1:7g.80gb@0"},
		},
		"an unknown product": {
			node: migNode("Tesla-T4", map[string]int64{"nvidia.com/mig-1g.10gb": 1}, nil),
			warn: "not a MIG product corral knows",
		},
		"a GPU without an id is left out, the others stay": {
			node: migNode("NVIDIA H100 80GB HBM3", nil, map[string]string{v1alpha1.AnnotationMIGLayout: `{"":"7g.80gb@0","gpu1":"7g.80gb@0"}`}),
			want: []string{"gpu1:7g.80gb@0"},
			warn: "a MIG GPU without an id; left out",
		},
		"an invalid layout leaves the GPU out": {
			node: migNode("NVIDIA H100 80GB HBM3", nil, map[string]string{v1alpha1.AnnotationMIGLayout: `{"gpu0":"4g.40gb@4"}`}),
			warn: "MIG GPU gpu0: 4g.40gb@4: invalid placement start",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n, warns := nodeFromObject(tc.node, "nvidia.com/gpu", nil, "gpu.nvidia.com")
			if diff := cmp.Diff(tc.want, migSummary(n)); diff != "" {
				t.Errorf("GPUs (-want +got):\n%s", diff)
			}
			if got := strings.Join(warns, "; "); !strings.Contains(got, tc.warn) || (tc.warn == "") != (got == "") {
				t.Errorf("warnings %q, want %q", got, tc.warn)
			}
			if _, err := cluster.New(cluster.Topology{}, []cluster.Node{n}); err != nil {
				t.Errorf("the node does not make a cluster: %v", err)
			}
		})
	}
}

func TestDeviceRequests(t *testing.T) {
	mig := func(res map[string]int64) *podB {
		b := pod("p")
		l := corev1.ResourceList{}
		for k, v := range res {
			l[corev1.ResourceName(k)] = *resource.NewQuantity(v, resource.DecimalSI)
		}
		b.p.Spec.Containers[0].Resources.Limits = l
		return b
	}
	cases := map[string]struct {
		pod     *corev1.Pod
		want    workload.Request
		wantErr string
	}{
		"one MIG instance": {pod: mig(map[string]int64{"nvidia.com/mig-1g.10gb": 1}).obj(),
			want: workload.Request{CPUMilli: 2000, MemMiB: 4096, GPUs: 1, MIGProfile: "1g.10gb"}},
		"two instances": {pod: mig(map[string]int64{"nvidia.com/mig-1g.10gb": 2}).obj(),
			wantErr: "asks for 2 instances of nvidia.com/mig-1g.10gb; corral places one instance per pod"},
		"two profiles": {pod: mig(map[string]int64{"nvidia.com/mig-1g.10gb": 1, "nvidia.com/mig-2g.20gb": 1}).obj(),
			wantErr: "MIG instances of 2 profiles (1g.10gb, 2g.20gb)"},
		"a MIG instance and a whole GPU": {pod: mig(map[string]int64{"nvidia.com/mig-1g.10gb": 1, "nvidia.com/gpu": 1}).obj(),
			wantErr: "a MIG instance (1g.10gb) and other GPUs"},
		"a memory share": {pod: pod("p").ann(v1alpha1.AnnotationGPUMemory, "10Gi").obj(),
			want: workload.Request{CPUMilli: 2000, MemMiB: 4096, GPUs: 1, GPUMemMiB: 10240}},
		"a memory share and milli": {pod: pod("p").ann(v1alpha1.AnnotationGPUMemory, "10Gi").ann(v1alpha1.AnnotationGPUMilli, "500").obj(),
			wantErr: "both ask for a share of one GPU"},
		"a memory share that is no quantity": {pod: pod("p").ann(v1alpha1.AnnotationGPUMemory, "lots").obj(),
			wantErr: `annotation corral.dev/gpu-memory="lots": want a positive quantity`},
		"a memory share past int64 bytes (it read as none)": {pod: pod("p").ann(v1alpha1.AnnotationGPUMemory, "1e30").obj(),
			wantErr: `annotation corral.dev/gpu-memory="1e30": want a positive quantity of GPU memory such as 10Gi, at most 1Pi`},
		"a memory share of 8Ei (it read as negative)": {pod: pod("p").ann(v1alpha1.AnnotationGPUMemory, "8Ei").obj(),
			wantErr: `at most 1Pi`},
		"a GPU count past int64 asks for more than any node has, not for none": {pod: func() *corev1.Pod {
			p := pod("p").obj()
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1e30")}
			return p
		}(), want: workload.Request{CPUMilli: 2000, MemMiB: 4096, GPUs: 1 << 16}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := podRequest(tc.pod, "nvidia.com/gpu", "gpu.nvidia.com", noLookup{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestMIGAccountingAfterRestart: a bound pod's recorded instance is taken
// exactly; a pod bound without the record takes the first free instance of
// its profile.
func TestMIGAccountingAfterRestart(t *testing.T) {
	node := migNode("NVIDIA H100 80GB HBM3", nil, map[string]string{
		v1alpha1.AnnotationMIGLayout: `{"gpu0":"1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6"}`})
	cn, _ := nodeFromObject(node, "nvidia.com/gpu", nil, "gpu.nvidia.com")
	s, err := cluster.New(cluster.Topology{}, []cluster.Node{cn})
	if err != nil {
		t.Fatal(err)
	}
	withMIG := func(name string) *podB {
		b := pod(name).boundTo("n")
		b.p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/mig-1g.10gb": resource.MustParse("1")}
		return b
	}
	// The unrecorded pod comes first: the recorded one must still get its
	// own instance.
	pods := []*corev1.Pod{
		withMIG("unrecorded").obj(),
		withMIG("recorded").ann(v1alpha1.AnnotationAssignedMIG, "gpu0:1g.10gb@0").obj(),
	}
	if _, warns := account(s, pods, map[string]assumedPod{}, nil, nil, adapterConfig{gpuResource: "nvidia.com/gpu"}); len(warns) > 0 {
		t.Fatal(warns)
	}
	// Instance 0 (recorded) and 1 (the first free one left) are in use.
	if got, want := s.MIGUsed(0, 0), uint8(1<<0|1<<1); got != want {
		t.Errorf("instances in use %07b, want %07b", got, want)
	}
}
