package kube

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

// TestMalformedAnnotations: every annotation corral reads on a pod, given a
// value it cannot read, makes the job Invalid with a reason that names the
// annotation, quotes the value and says the form it wants; the job is not
// run with a default in its place. Values users plausibly write are the
// inputs: "1d" (Go durations have no days), "yes", a fraction on 2 GPUs.
func TestMalformedAnnotations(t *testing.T) {
	cases := map[string]struct {
		pod  *podB
		want string
	}{
		"expected runtime in words": {pod("a").gpus(1).ann(v1alpha1.AnnotationExpectedRuntime, "6 hours"),
			`annotation corral.dev/expected-runtime="6 hours": want a duration such as 6h`},
		"checkpoint interval negative": {pod("a").gpus(1).ann(v1alpha1.AnnotationCheckpointInterval, "-30m"),
			`annotation corral.dev/checkpoint-interval="-30m": want a duration such as 6h`},
		"restart overhead without a unit": {pod("a").gpus(1).ann(v1alpha1.AnnotationRestartOverhead, "600"),
			`annotation corral.dev/restart-overhead="600": want a duration such as 6h`},
		"min runtime in days": {pod("a").gpus(1).ann(v1alpha1.AnnotationMinRuntime, "1d"),
			`annotation corral.dev/min-runtime="1d": want a duration such as 6h`},
		"max runtime zero": {pod("a").gpus(1).ann(v1alpha1.AnnotationMaxRuntime, "0s"),
			`annotation corral.dev/max-runtime="0s": want a positive duration such as 12h`},
		"max runtime past time.Duration": {pod("a").gpus(1).ann(v1alpha1.AnnotationMaxRuntime, "3000000h"),
			`annotation corral.dev/max-runtime="3000000h": want a positive duration such as 12h`},
		"preemptible yes": {pod("a").gpus(1).ann(v1alpha1.AnnotationPreemptible, "yes"),
			`annotation corral.dev/preemptible="yes": want true or false`},
		"remediation in lower case": {pod("a").gpus(1).ann(v1alpha1.AnnotationRemediation, "restartgang"),
			`annotation corral.dev/remediation: unknown remediation "restartgang" (known: RestartGang, ReplaceRanks, WaitForRepair)`},
		"repair wait negative": {pod("a").gpus(1).ann(v1alpha1.AnnotationRepairWait, "-1h"),
			`annotation corral.dev/repair-wait="-1h": want a duration such as 30m`},
		"min members zero": {pod("a").gpus(1).ann(v1alpha1.AnnotationMinMembers, "0"),
			`annotation corral.dev/min-members="0": want a positive integer`},
		"min members past int": {pod("a").gpus(1).ann(v1alpha1.AnnotationMinMembers, "99999999999999999999"),
			`annotation corral.dev/min-members="99999999999999999999": want a positive integer`},
		"gpu milli as a fraction": {pod("a").ann(v1alpha1.AnnotationGPUMilli, "0.5"),
			`pod a: annotation corral.dev/gpu-milli="0.5": want 1-999 milli of one GPU`},
		"gpu milli on 2 GPUs": {pod("a").gpus(2).ann(v1alpha1.AnnotationGPUMilli, "500"),
			`pod a: annotation corral.dev/gpu-milli asks for a fraction of one GPU but the pod requests 2 GPUs`},
		"gpu memory on 2 GPUs": {pod("a").gpus(2).ann(v1alpha1.AnnotationGPUMemory, "10Gi"),
			`pod a: annotation corral.dev/gpu-memory asks for a share of one GPU but the pod requests 2 GPUs`},
		"every problem at once, in order": {pod("a").gpus(1).ann(v1alpha1.AnnotationMinMembers, "two").
			ann(v1alpha1.AnnotationExpectedRuntime, "soon").ann(v1alpha1.AnnotationPreemptible, "no way"),
			`annotation corral.dev/min-members="two": want a positive integer; ` +
				`annotation corral.dev/expected-runtime="soon": want a duration such as 6h; ` +
				`annotation corral.dev/preemptible="no way": want true or false`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kjs := buildJobs([]*corev1.Pod{tc.pod.obj()}, nil, fakeGroups{}, nil, testCfg)
			if len(kjs) != 1 || kjs[0].invalid != tc.want {
				var got []string
				for _, kj := range kjs {
					got = append(got, kj.invalid)
				}
				t.Fatalf("invalid reasons %q, want [%q]", got, tc.want)
			}
		})
	}
}

// TestMalformedLastCheckpoint: a running job's last-checkpoint that is no
// RFC 3339 time, or lies in the future, is ignored with a warning naming
// the pod and the annotation; the job keeps running, priced as if it had
// not checkpointed.
func TestMalformedLastCheckpoint(t *testing.T) {
	s, err := cluster.New(cluster.Topology{}, []cluster.Node{{Name: "n1", CPUMilli: 64000, MemMiB: 1 << 20,
		Devices: []cluster.Device{{ID: "gpu0", Model: "H100"}}}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(10_000, 0).UTC()
	for _, tc := range []struct {
		value, want string
	}{
		{"2026-07-01 12:30", `pod ns/w0: annotation corral.dev/last-checkpoint="2026-07-01 12:30" is not an RFC 3339 time; ignored`},
		{"1h", `pod ns/w0: annotation corral.dev/last-checkpoint="1h" is not an RFC 3339 time; ignored`},
		{now.Add(time.Hour).Format(time.RFC3339), `pod ns/w0: annotation corral.dev/last-checkpoint="1970-01-01T03:46:40Z" is in the future; ignored`},
	} {
		p := pod("w0").gpus(1).boundTo("n1").ann(v1alpha1.AnnotationLastCheckpoint, tc.value).obj()
		p.Status.StartTime = ptr(metav1.NewTime(time.Unix(5_000, 0)))
		ref := workload.PodRef{Job: "j"}
		kj := &kjob{job: &workload.Job{ID: "j"}, refs: []workload.PodRef{ref},
			pods: map[workload.PodRef]*corev1.Pod{ref: p}, bound: map[workload.PodRef]string{ref: "n1"}}
		holds := map[string]podHold{string(p.UID): {node: 0, alloc: cluster.Alloc{Devices: []cluster.DeviceShare{{Device: 0, Milli: 1000}}}}}
		rj, warns := runningJob(kj, holds, nil, s, now)
		if diff := cmp.Diff([]string{tc.want}, warns); diff != "" {
			t.Errorf("%q: warnings (-want +got):\n%s", tc.value, diff)
		}
		if len(rj.Pods) != 1 || len(rj.Checkpoints) != 0 {
			t.Errorf("%q: running job with %d pods and checkpoints %v, want its pod and none", tc.value, len(rj.Pods), rj.Checkpoints)
		}
	}
}
