package backfill

import (
	"testing"
	"time"
)

func TestHumanize(t *testing.T) {
	cases := map[time.Duration]string{
		10 * time.Second: "1 min", 40 * time.Minute: "40 min", 100 * time.Minute: "1.7 h",
		20 * time.Hour: "20 h", 72 * time.Hour: "3.0 d",
	}
	for d, want := range cases {
		if got := Humanize(d); got != want {
			t.Errorf("Humanize(%v) = %q, want %q", d, got, want)
		}
	}
}
