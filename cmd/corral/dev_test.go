package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/corral-dev/corral/test/integration/framework"
)

// TestDevControllers: --with takes every controller the framework runs,
// starts Kueue after the controllers whose kinds it manages whatever the
// order given, and names the choices when one is unknown.
func TestDevControllers(t *testing.T) {
	cases := []struct {
		with    []string
		want    []framework.Controller
		wantErr string
	}{
		{with: nil, want: nil},
		{with: []string{"kueue", "jobset"}, want: []framework.Controller{framework.JobSet, framework.Kueue}},
		{with: []string{" lws", "kuberay", "kueue"}, want: []framework.Controller{framework.LeaderWorkerSet, framework.KubeRay, framework.Kueue}},
		{with: []string{"volcano"}, wantErr: "want jobset, lws, kuberay or kueue"},
	}
	for _, tc := range cases {
		got, err := devControllers(tc.with)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: err %v, want %q", tc.with, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%v: %v, %v; want %v", tc.with, got, err, tc.want)
		}
	}
}

// TestDevControllersMissing: controllers not built are named as a list,
// not as a Go slice, before anything starts.
func TestDevControllersMissing(t *testing.T) {
	t.Setenv("CORRAL_BIN", t.TempDir())
	err := execute(newDevCmd(), "dev", "up", "--with", "jobset,lws", "--kubeconfig-out", t.TempDir()+"/k")
	want := "--with: missing "
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "[") ||
		!strings.Contains(err.Error(), ", ") {
		t.Fatalf("error %v, want %q followed by the missing binaries, comma-separated", err, want)
	}
}
