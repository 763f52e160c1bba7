package kube

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/api/v1alpha1"
)

// TestWarnLogFresh: a warning is logged the cycle it appears, not in the
// cycles it lasts, and again when it comes back after a cycle without it.
func TestWarnLogFresh(t *testing.T) {
	node := "node n1: annotation corral.dev/gpu-topology: bad"
	pod := `pod ns/a: annotation corral.dev/last-checkpoint="soon" is not an RFC 3339 time; ignored`
	cycles := []struct {
		msgs, want []string
	}{
		{msgs: []string{node}, want: []string{node}},
		{msgs: []string{node, pod, pod}, want: []string{pod}},
		{msgs: []string{pod, node}},
		{msgs: nil},
		{msgs: []string{node}, want: []string{node}},
	}
	var l warnLog
	for i, c := range cycles {
		if diff := cmp.Diff(c.want, l.fresh(c.msgs)); diff != "" {
			t.Errorf("cycle %d (-want +got):\n%s", i, diff)
		}
	}
}

// TestCycleWarnsOnce: a node's malformed corral.dev/gpu-topology and a
// job's unknown preferred level reach the scheduler's log at Warn level
// (at Debug, the default info level hid them), once while they last.
func TestCycleWarnsOnce(t *testing.T) {
	n := rackNode("a-0", "a", 8)
	n.Annotations = map[string]string{v1alpha1.AnnotationGPUTopology: "[{"}
	fc := newFakeCluster(t, n, gangMember("g-0", "g", 1).ann(v1alpha1.AnnotationPreferredTopology, "spine").obj())
	var logs bytes.Buffer
	fc.s.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	fc.cycle(t)
	fc.cycle(t)
	var warns []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(line, "level=WARN") {
			warns = append(warns, line)
		}
	}
	want := []string{"annotation corral.dev/gpu-topology: unexpected end of JSON input; using the default layout",
		`preferred level \"spine\" is not a level of the cluster`}
	if len(warns) != len(want) {
		t.Fatalf("warnings logged:\n%s\nwant one line for each of %q", strings.Join(warns, "\n"), want)
	}
	for i, w := range want {
		if !strings.Contains(warns[i], w) {
			t.Errorf("warning %d: %s, want it to say %q", i, warns[i], w)
		}
	}
}
