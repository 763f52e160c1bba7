package kube

import (
	"bytes"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TestControllerDocsExamples keeps docs/controllers honest: each page shows
// its example file verbatim (the file the integration tests apply), and the
// example's owner object gives the gang shape the page describes.
func TestControllerDocsExamples(t *testing.T) {
	cases := []struct {
		page, file string
		shape      func(u *unstructured.Unstructured) gangShape
		wantMin    int
		wantLater  int
	}{
		{"jobset.md", "jobset.yaml", func(u *unstructured.Unstructured) gangShape {
			return (&ownerView{jobSets: store(u)}).jobSetShape("ns", u.GetName(), []*corev1.Pod{pod("p").jobSet("train", "workers").obj()}, nil)
		}, 4, 0},
		{"jobset.md", "jobset-exclusive.yaml", func(u *unstructured.Unstructured) gangShape {
			// Child Job 0's leader exists: its follower is held for.
			leader := pod("exclusive-workers-0-0").jobSet("exclusive", "workers").ann(jobSetExclusiveKey, "corral.dev/rack").ann(jobCompletionIndexKey, "0").obj()
			tr := true
			leader.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "exclusive-workers-0", Controller: &tr}}
			s := (&ownerView{jobSets: store(u)}).jobSetShape("ns", u.GetName(), []*corev1.Pod{leader}, nil)
			if s.exclusiveLabel != "corral.dev/rack" {
				t.Errorf("exclusive level label %q, want corral.dev/rack", s.exclusiveLabel)
			}
			return s
		}, 4, 1},
		{"leaderworkerset.md", "leaderworkerset.yaml", func(u *unstructured.Unstructured) gangShape {
			return (&ownerView{lwss: store(u)}).lwsShape("ns", u.GetName(), []*corev1.Pod{pod("serve-0").lws("serve", "0", "0", 4).obj()})
		}, 4, 3},
		{"kuberay.md", "raycluster.yaml", func(u *unstructured.Unstructured) gangShape {
			return (&ownerView{rayClusters: store(u)}).rayShape("ns", u.GetName())
		}, 3, 0},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			page, err := os.ReadFile("../../docs/controllers/" + tc.page)
			if err != nil {
				t.Fatal(err)
			}
			file, err := os.ReadFile("../../docs/controllers/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(page), string(file)) {
				t.Errorf("docs/controllers/%s does not show %s verbatim", tc.page, tc.file)
			}
			var m map[string]any
			if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(file), 4096).Decode(&m); err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: m}
			u.SetNamespace("ns")
			s := tc.shape(u)
			later := 0
			for _, l := range s.later {
				later += l.count
			}
			if s.min != tc.wantMin || later != tc.wantLater || s.waiting != "" || s.unknown != "" {
				t.Errorf("shape: min %d, later %d, waiting %q, unknown %q; want min %d, later %d", s.min, later, s.waiting, s.unknown, tc.wantMin, tc.wantLater)
			}
		})
	}
}

// TestKueueDocsExamples: docs/controllers/kueue.md shows the two files the
// integration test TestKueueAdmitsCorralPlaces applies, verbatim, and the
// Job's required topology maps to the rack level the page says.
func TestKueueDocsExamples(t *testing.T) {
	page, err := os.ReadFile("../../docs/controllers/kueue.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"kueue.yaml", "kueue-job.yaml"} {
		file, err := os.ReadFile("../../docs/controllers/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(page), string(file)) {
			t.Errorf("docs/controllers/kueue.md does not show %s verbatim", f)
		}
	}
	file, err := os.ReadFile("../../docs/controllers/kueue-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(file), kueueRequiredTopology+": corral.dev/rack") {
		t.Errorf("kueue-job.yaml does not ask Kueue for one rack (%s)", kueueRequiredTopology)
	}
}
