package trace

import (
	"os"
	"strings"
	"testing"
)

// TestDocsExamples keeps docs/formats.md honest: its examples are the
// testdata files the other tests load, verbatim.
func TestDocsExamples(t *testing.T) {
	doc, err := os.ReadFile("../../docs/formats.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"../../examples/sim/cluster.yaml", "../../examples/sim/jobs.csv", "../../examples/sim/jobs.yaml", "../../examples/sim/queues.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), string(b)) {
			t.Errorf("docs/formats.md does not show %s verbatim", f)
		}
	}
}
