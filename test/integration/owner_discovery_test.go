package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// TestOwnerCRDInstalledLater: JobSet's CRDs and controller installed after
// corral started. corral finds the resource at its next discovery round
// (every 10 s) and places the example JobSet whole in one rack; before,
// its pods waited forever with "the gang's size is unknown".
func TestOwnerCRDInstalledLater(t *testing.T) {
	requireControllers(t, framework.JobSet)
	c := controlPlaneWith(t, 2, 4) // no controller yet
	ns := kit.Namespace(t, c, "later-")
	startCorral(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.StartController(ctx, framework.JobSet); err != nil {
		t.Fatal(err)
	}
	create(t, c, ns, example(t, "jobset.yaml"))
	eventually(t, 90*time.Second, "the JobSet created after its CRD was installed bound whole in one rack", func() (bool, string) {
		pods := podsWith(t, c, ns, "jobset.sigs.k8s.io/jobset-name=train")
		if !sameRack(pods) {
			t.Fatalf("JobSet spans racks")
		}
		msg := ""
		for _, p := range pods {
			if _, m := scheduledCondition(&p); m != "" {
				msg = m
			}
		}
		return len(pods) == 4 && boundCount(pods) == 4, fmt.Sprintf("%d of %d bound; %s", boundCount(pods), len(pods), msg)
	})
}
