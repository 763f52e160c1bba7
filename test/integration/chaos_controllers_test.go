//go:build unix

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// TestChaosCorralKilledMidBindWithControllers: corral (a `corral scheduler`
// process) is SIGKILLed while it binds the example JobSet (4 pods) and the
// example LeaderWorkerSet group (leader bound, its 3 workers' room held
// until LWS creates them), one pod every 700 ms. A new process finds both
// gangs cut off and completes them: afterwards every gang is whole, each
// in one rack, and no GPU is given twice.
func TestChaosCorralKilledMidBindWithControllers(t *testing.T) {
	c := controlPlaneWith(t, 2, 4, framework.JobSet, framework.LeaderWorkerSet)
	ns := kit.Namespace(t, c, "killctl-")
	js := example(t, "jobset.yaml")
	// kwok completes Job pods at once otherwise; these keep running.
	rjs, _, _ := unstructured.NestedSlice(js.Object, "spec", "replicatedJobs")
	_ = unstructured.SetNestedField(rjs[0].(map[string]any), "1h", "template", "spec", "template", "metadata", "annotations", "pod-complete.stage.kwok.x-k8s.io/delay")
	_ = unstructured.SetNestedSlice(js.Object, rjs, "spec", "replicatedJobs")
	create(t, c, ns, js)
	create(t, c, ns, example(t, "leaderworkerset.yaml"))
	gangs := map[string]string{ // gang -> pod selector
		"JobSet train":          "jobset.sigs.k8s.io/jobset-name=train",
		"LeaderWorkerSet serve": "leaderworkerset.sigs.k8s.io/name=serve",
	}
	state := func() (partial []string, counts map[string][2]int) {
		counts = map[string][2]int{}
		for g, sel := range gangs {
			pods := podsWith(t, c, ns, sel)
			n := boundCount(pods)
			counts[g] = [2]int{n, len(pods)}
			if n > 0 && n < 4 {
				partial = append(partial, g)
			}
		}
		return partial, counts
	}

	first := startCorralProcess(t, c, "corral-1", "--leader-elect=false", "--debug-bind-delay", "700ms")
	eventually(t, 90*time.Second, "a gang part-bound", func() (bool, string) {
		partial, counts := state()
		return len(partial) > 0, fmt.Sprint(counts)
	})
	first.kill()
	partial, counts := state()
	t.Logf("killed corral mid-bind: %v (bound, pods); cut off: %s", counts, strings.Join(partial, ", "))
	if len(partial) == 0 {
		t.Fatalf("no gang was cut off by the kill (%v); the test needs a longer bind delay", counts)
	}

	startCorralProcess(t, c, "corral-2", "--leader-elect=false")
	eventually(t, 120*time.Second, "every gang whole after the restart", func() (bool, string) {
		_, counts := state()
		for _, n := range counts {
			if n[0] != 4 || n[1] != 4 {
				return false, fmt.Sprint(counts)
			}
		}
		return true, ""
	})
	for g, sel := range gangs {
		if !sameRack(podsWith(t, c, ns, sel)) {
			t.Errorf("%s spans racks", g)
		}
	}
	checkNoGPUSharedTwice(t, c)
}
