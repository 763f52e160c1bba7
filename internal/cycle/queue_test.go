package cycle

import (
	"math"
	"testing"
)

func TestDominantShare(t *testing.T) {
	if got := DominantShare(nil, nil); got != 0 {
		t.Errorf("no usage: %v", got)
	}
	if got := DominantShare(Amounts{GPU("H100"): 1}, Amounts{CPU: 1}); !math.IsInf(got, 1) {
		t.Errorf("usage without fair share: %v", got)
	}
	if got := DominantShare(Amounts{GPU("H100"): 3, CPU: 1}, Amounts{GPU("H100"): 4, CPU: 4}); got != 0.75 {
		t.Errorf("dominant share: %v", got)
	}
}
