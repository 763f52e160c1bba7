package trace

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGenLLMUsers: the users come from their own stream, so a trace with
// users is the trace without them plus a name per job, the same for one
// seed, each name one of its queue's users.
func TestGenLLMUsers(t *testing.T) {
	c := mustCluster(t, "dgx-h100")
	gen := func(spec string) []Job {
		tr, err := LoadTrace(spec, Options{Seed: 42, Cluster: c})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Jobs
	}
	with, again, without := gen("gen:llm?jobs=1000"), gen("gen:llm?jobs=1000"), gen("gen:llm?jobs=1000&users=0")
	if diff := cmp.Diff(with, again); diff != "" {
		t.Errorf("same seed, different users (-first +second):\n%s", diff)
	}
	users := map[string]int{}
	for i := range with {
		u := with[i].User
		if without[i].User != "" {
			t.Fatalf("users=0: job %s has user %q", without[i].ID, without[i].User)
		}
		if !strings.HasPrefix(u, with[i].Queue+"-u") {
			t.Fatalf("job %s of queue %s has user %q", with[i].ID, with[i].Queue, u)
		}
		users[u]++
		stripped := *with[i].Job
		stripped.User, stripped.Source = "", without[i].Source // the source names the spec
		w := with[i]
		w.Job = &stripped
		if diff := cmp.Diff(without[i], w); diff != "" {
			t.Fatalf("users moved job %d's other fields (-users=0 +users):\n%s", i, diff)
		}
	}
	if n := len(users); n < 2*len(llmQueues) || n > defaultUsers*len(llmQueues) {
		t.Errorf("%d distinct users, want between %d and %d", n, 2*len(llmQueues), defaultUsers*len(llmQueues))
	}
}

// TestGenLLMUserRuntimesCorrelate: the share of the variance of
// ln(runtime) that the user explains (eta squared) is large under the
// default spread and small when users are made uninformative; the
// published traces' point is the first.
func TestGenLLMUserRuntimesCorrelate(t *testing.T) {
	c := mustCluster(t, "dgx-h100")
	eta2 := func(spec string) float64 {
		tr, err := LoadTrace(spec, Options{Seed: 43, Cluster: c})
		if err != nil {
			t.Fatal(err)
		}
		type acc struct{ n, sum float64 }
		by := map[string]*acc{}
		var all acc
		var xs []float64
		for _, j := range tr.Jobs {
			x := math.Log(j.Runtime.Seconds())
			xs = append(xs, x)
			all.n++
			all.sum += x
			a := by[j.User]
			if a == nil {
				a = &acc{}
				by[j.User] = a
			}
			a.n++
			a.sum += x
		}
		mean := all.sum / all.n
		var total, within float64
		for i, j := range tr.Jobs {
			d := xs[i] - mean
			total += d * d
			a := by[j.User]
			e := xs[i] - a.sum/a.n
			within += e * e
		}
		return 1 - within/total
	}
	got := eta2("gen:llm?jobs=3000")
	t.Logf("users explain %.2f of the variance of ln(runtime)", got)
	if got < 0.6 {
		t.Errorf("users explain %.2f of the variance of ln(runtime), want >= 0.6", got)
	}
	if got := eta2("gen:llm?jobs=3000&userspread=100"); got > 0.1 {
		t.Errorf("with userspread=100 users explain %.2f, want <= 0.1", got)
	}
}
