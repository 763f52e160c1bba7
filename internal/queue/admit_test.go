package queue

import (
	"errors"
	"testing"
)

func TestAdmit(t *testing.T) {
	tree, _ := Build(specs(
		q("org"),
		q("team-a").Parent("org").Namespaces("ns-a", "ns-shared"),
		q("team-b").Parent("org"),
		q("bad").Guarantee(h100, -1),
	))
	cases := map[string]struct {
		queue, ns string
		want      Refusal // ignored when ok
		ok        bool
		msg       string
	}{
		"a listed namespace":     {queue: "team-a", ns: "ns-shared", ok: true},
		"any namespace":          {queue: "team-b", ns: "whatever", ok: true},
		"a namespace not listed": {queue: "team-a", ns: "ns-b", want: NamespaceDenied, msg: `namespace "ns-b" may not submit to queue "team-a" (it admits namespaces ns-a, ns-shared)`},
		"an inner queue":         {queue: "org", ns: "ns-a", want: NotLeaf, msg: `queue "org" is not a leaf queue; submit to one of its leaves (team-a, team-b)`},
		"the root":               {queue: "root", ns: "ns-a", want: UnknownQueue, msg: `queue "root" does not exist`},
		"no such queue":          {queue: "nope", ns: "ns-a", want: UnknownQueue, msg: `queue "nope" does not exist`},
		"a queue Build left out": {queue: "bad", ns: "ns-a", want: InvalidQueue, msg: `queue "bad" is invalid: negative guarantee of gpu/H100: -0.001 H100 GPUs`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tree.Admit(tc.queue, tc.ns)
			if tc.ok {
				if err != nil {
					t.Fatalf("Admit: %v", err)
				}
				return
			}
			var ae *AdmitError
			if !errors.As(err, &ae) {
				t.Fatalf("Admit = %v, want an *AdmitError", err)
			}
			if ae.Refusal != tc.want || err.Error() != tc.msg {
				t.Errorf("Admit = %v %q, want %v %q", ae.Refusal, err, tc.want, tc.msg)
			}
		})
	}
}

func TestDefaultQueue(t *testing.T) {
	with, _ := Build(specs(q("default").Namespaces("ns-a"), q("other")))
	if got, err := with.DefaultQueue("ns-a"); got != "default" || err != nil {
		t.Errorf("DefaultQueue(ns-a) = %q, %v", got, err)
	}
	if _, err := with.DefaultQueue("ns-b"); err == nil || err.(*AdmitError).Refusal != NoDefault {
		t.Errorf("DefaultQueue(ns-b) = %v, want NoDefault", err)
	}
	without, _ := Build(specs(q("other")))
	_, err := without.DefaultQueue("ns-a")
	want := `namespace "ns-a" has no default queue: queue "default" does not exist`
	if err == nil || err.Error() != want {
		t.Errorf("DefaultQueue without a default = %v, want %s", err, want)
	}
}

// TestDefaultForNamespaces: the queue that lists a namespace in DefaultFor
// takes its jobs that name none; two such queues make no default; a queue
// its driver could not read refuses with the driver's reason, and so does
// the tree below it.
func TestDefaultForNamespaces(t *testing.T) {
	tree, _ := Build(specs(
		q("org"),
		q("team-a").Parent("org").Namespaces("ns-a", "ns-shared").DefaultFor("ns-a"),
		q("team-b").Parent("org").DefaultFor("ns-b", "ns-both"),
		q("team-c").DefaultFor("ns-both"),
		q("default"),
		q("unread").Problem(`resource "cpu": does not decode`).DefaultFor("ns-unread"),
		q("below-unread").Parent("unread"),
	))
	type got struct {
		queue   string
		refusal string
		msg     string
	}
	cases := map[string]struct {
		ns   string
		want got
	}{
		"its namespace's default": {"ns-a", got{queue: "team-a"}},
		"a default admitting any": {"ns-b", got{queue: "team-b"}},
		"the queue named default": {"ns-other", got{queue: "default"}},
		"two defaults": {"ns-both", got{refusal: "NoDefault",
			msg: `namespace "ns-both" has no default queue: queues team-b, team-c all list it in defaultForNamespaces; the job must name its queue`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q, err := tree.DefaultQueue(tc.ns)
			g := got{queue: q}
			if ae, ok := err.(*AdmitError); ok {
				g.refusal, g.msg = ae.Refusal.String(), ae.Error()
			} else if err != nil {
				t.Fatalf("DefaultQueue: %v", err)
			}
			if g != tc.want {
				t.Errorf("DefaultQueue(%s) = %+v, want %+v", tc.ns, g, tc.want)
			}
		})
	}
	for queue, want := range map[string]string{
		"unread":       `queue "unread" is invalid: resource "cpu": does not decode`,
		"below-unread": `queue "below-unread" is invalid: left out with its ancestor "unread", which is invalid`,
	} {
		if err := tree.Admit(queue, "ns-a"); err == nil || err.Error() != want {
			t.Errorf("Admit(%s) = %v, want %s", queue, err, want)
		}
	}
}
