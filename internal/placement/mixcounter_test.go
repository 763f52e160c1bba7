package placement

import (
	"testing"

	"github.com/corral-dev/corral/internal/workload"
)

// TestMixCounterForget: pods that left leave the mix; a shape whose count
// reaches zero is gone from it.
func TestMixCounterForget(t *testing.T) {
	one, eight := workload.Request{GPUs: 1}, workload.Request{GPUs: 8}
	var c MixCounter
	c.Observe(one, 3)
	c.Observe(eight, 1)
	c.Forget(eight, 1)
	c.Forget(one, 1)
	m := c.Mix(0)
	if len(m) != 1 || m[0].Request.GPUs != 1 || m[0].Weight != 1 {
		t.Fatalf("mix %+v, want only the 1-GPU shape", m)
	}
	c.Forget(one, 5) // more than counted: down to zero, not below
	if m := c.Mix(0); m != nil {
		t.Errorf("mix %+v after every pod left, want none", m)
	}
}
