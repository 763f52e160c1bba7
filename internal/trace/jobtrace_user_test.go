package trace

import (
	"strings"
	"testing"
)

// TestJobTraceUser: the user column and field are optional; absent, jobs
// have no user, so traces written before them read as before.
func TestJobTraceUser(t *testing.T) {
	csvWith := "job,submit,queue,user,gpus\nj1,0,q,alice,1\nj2,5,q,,1\n"
	csvWithout := "job,submit,queue,gpus\nj1,0,q,1\n"
	yamlWith := editYAML(jobsYAML, 3, "    submit: 10\n    user: bob")
	cases := map[string]struct {
		read func() (*Trace, error)
		want []string
	}{
		"csv with users":    {func() (*Trace, error) { return ReadJobTraceCSV(strings.NewReader(csvWith), "t.csv") }, []string{"alice", ""}},
		"csv without users": {func() (*Trace, error) { return ReadJobTraceCSV(strings.NewReader(csvWithout), "t.csv") }, []string{""}},
		"yaml with a user":  {func() (*Trace, error) { return ReadJobTraceYAML(strings.NewReader(yamlWith), "t.yaml") }, []string{"bob"}},
		"yaml without":      {func() (*Trace, error) { return ReadJobTraceYAML(strings.NewReader(jobsYAML), "t.yaml") }, []string{""}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tr, err := tc.read()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, j := range tr.Jobs {
				got = append(got, j.User)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
				t.Errorf("users %q, want %q", got, tc.want)
			}
		})
	}
}
