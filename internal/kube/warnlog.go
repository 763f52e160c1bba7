package kube

// warnLog remembers the warnings of the last cycle, so that a problem in
// the cluster's objects (a node's malformed corral.dev/gpu-topology, a pod's
// last-checkpoint that is no time) is logged at Warn level when it appears
// and not again every cycle while it lasts; at Debug level, where they
// were, an admin never saw them.
type warnLog struct{ last map[string]bool }

// fresh returns the messages that the last cycle did not have, once each,
// in order, and remembers msgs for the next cycle.
func (l *warnLog) fresh(msgs []string) []string {
	now := make(map[string]bool, len(msgs))
	var out []string
	for _, m := range msgs {
		if !l.last[m] && !now[m] {
			out = append(out, m)
		}
		now[m] = true
	}
	l.last = now
	return out
}
