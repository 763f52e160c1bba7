// Package queue is the queue tree: hierarchical queues with guaranteed
// quota, limits and weights, the fair share of a capacity among them, DRF
// ordering of leaf queues, and the order of jobs inside one queue.
//
// It is engine code: it imports nothing from k8s.io, does no I/O, never reads
// the clock, walks every map in sorted key order and ends every sort on a
// unique key, so the same input always gives the same answer. docs/queues.md
// describes the model for users.
package queue

import (
	"fmt"
	"strings"

	"github.com/corral-dev/corral/internal/cycle"
)

// Resource, Amounts and Spec are the queue inputs of a snapshot; they live
// in internal/cycle, below every policy, so the Snapshot can carry them.
type (
	Resource = cycle.Resource
	Amounts  = cycle.Amounts
	Spec     = cycle.QueueSpec
)

const (
	CPU          = cycle.CPU
	Memory       = cycle.Memory
	AllResources = cycle.AllResources
	RootName     = cycle.RootQueue
)

// GPU names the GPUs of one model, measured in GPU-milli.
func GPU(model string) Resource { return cycle.GPU(model) }

// Problem is why Build left a queue out of the tree.
type Problem struct {
	Queue  string
	Reason string
}

func (p Problem) String() string { return fmt.Sprintf("queue %q: %s", p.Queue, p.Reason) }

// Tree is a validated queue tree. It is immutable once built and safe to
// share between goroutines.
type Tree struct {
	nodes    []node         // depth first, children in name order; nodes[0] is the root
	index    map[string]int // name -> position in nodes (lookup only, never walked)
	problems []Problem
	invalid  map[string]string // excluded queue -> first reason, for Admit's message
	// defaultFor maps a namespace to the queues naming it in DefaultFor,
	// sorted (left-out queues included: Admit says why they refuse).
	defaultFor map[string][]string
}

type node struct {
	spec     Spec
	parent   int   // -1 for the root
	children []int // in name order
	leaf     bool  // no Spec names it as parent
	depth    int
}

// Problems returns what Build reported, sorted by queue then reason.
func (t *Tree) Problems() []Problem { return append([]Problem(nil), t.problems...) }

// Queues lists every queue of the tree except the root, depth first with
// siblings in name order (a parent before its children).
func (t *Tree) Queues() []string {
	var out []string
	for _, n := range t.nodes[1:] {
		out = append(out, n.spec.Name)
	}
	return out
}

// Leaves lists the leaf queues (the ones that take jobs), in Queues order.
func (t *Tree) Leaves() []string {
	var out []string
	for _, n := range t.nodes[1:] {
		if n.leaf {
			out = append(out, n.spec.Name)
		}
	}
	return out
}

// Spec returns a copy of a queue's spec (Parent spelled "root" for top-level
// queues).
func (t *Tree) Spec(queue string) (Spec, bool) {
	i, ok := t.lookup(queue)
	if !ok {
		return Spec{}, false
	}
	return t.nodes[i].spec.Clone(), true
}

// IsLeaf reports whether the queue exists and takes jobs.
func (t *Tree) IsLeaf(queue string) bool {
	i, ok := t.lookup(queue)
	return ok && t.nodes[i].leaf
}

// Reclaims reports whether the queue or one of its ancestors sets Reclaim
// or StrictReclaim (which implies it, whatever the driver set).
func (t *Tree) Reclaims(queue string) bool {
	return t.upward(queue, func(s *Spec) bool { return s.Reclaim || s.StrictReclaim })
}

// StrictReclaim reports whether the queue or one of its ancestors sets
// StrictReclaim.
func (t *Tree) StrictReclaim(queue string) bool {
	return t.upward(queue, func(s *Spec) bool { return s.StrictReclaim })
}

// upward reports whether set holds for the queue or one of its ancestors.
func (t *Tree) upward(queue string, set func(*Spec) bool) bool {
	i, ok := t.lookup(queue)
	for ok && i > 0 {
		if set(&t.nodes[i].spec) {
			return true
		}
		i = t.nodes[i].parent
	}
	return false
}

// lookup finds a queue other than the root.
func (t *Tree) lookup(queue string) (int, bool) {
	i, ok := t.index[queue]
	return i, ok && i > 0
}

// Refusal says why a job may not enter a queue.
type Refusal uint8

const (
	UnknownQueue    Refusal = iota // no queue of that name
	InvalidQueue                   // the queue was left out of the tree (see Problems)
	NotLeaf                        // inner queues take no jobs
	NamespaceDenied                // the queue does not admit the namespace
	NoDefault                      // no queue label and no default queue for the namespace
)

func (r Refusal) String() string {
	return [...]string{"UnknownQueue", "InvalidQueue", "NotLeaf", "NamespaceDenied", "NoDefault"}[r]
}

// AdmitError is a refused submission; Error renders it for users.
type AdmitError struct {
	Queue, Namespace string
	Refusal          Refusal
	Detail           string // e.g. the allowed namespaces, the queue's leaves
}

func (e *AdmitError) Error() string {
	switch e.Refusal {
	case UnknownQueue:
		return fmt.Sprintf("queue %q does not exist", e.Queue)
	case InvalidQueue:
		return fmt.Sprintf("queue %q is invalid: %s", e.Queue, e.Detail)
	case NotLeaf:
		return fmt.Sprintf("queue %q is not a leaf queue; submit to one of its leaves (%s)", e.Queue, e.Detail)
	case NamespaceDenied:
		return fmt.Sprintf("namespace %q may not submit to queue %q (it admits %s)", e.Namespace, e.Queue, e.Detail)
	default:
		return fmt.Sprintf("namespace %q has no default queue: %s", e.Namespace, e.Detail)
	}
}

// Admit checks that a job of the namespace may enter the queue: the queue
// exists in the tree, is a leaf, and admits the namespace. The error is an
// *AdmitError.
func (t *Tree) Admit(queue, namespace string) error {
	i, ok := t.lookup(queue)
	if !ok {
		if why, bad := t.invalid[queue]; bad {
			return &AdmitError{Queue: queue, Namespace: namespace, Refusal: InvalidQueue, Detail: why}
		}
		return &AdmitError{Queue: queue, Namespace: namespace, Refusal: UnknownQueue}
	}
	n := &t.nodes[i]
	if !n.leaf {
		return &AdmitError{Queue: queue, Namespace: namespace, Refusal: NotLeaf, Detail: t.leavesUnder(i)}
	}
	if !admits(n.spec.Namespaces, namespace) {
		return &AdmitError{Queue: queue, Namespace: namespace, Refusal: NamespaceDenied,
			Detail: "namespaces " + strings.Join(n.spec.Namespaces, ", ")}
	}
	return nil
}

// DefaultQueue is the queue of a job that names none: the one queue that
// lists the namespace in DefaultFor, else the leaf queue named "default".
// Either must admit the namespace. Two queues listing the namespace make no
// default: the job must name its queue. The error is an *AdmitError.
func (t *Tree) DefaultQueue(namespace string) (string, error) {
	switch d := t.defaultFor[namespace]; {
	case len(d) == 1:
		if err := t.Admit(d[0], namespace); err != nil {
			return "", err
		}
		return d[0], nil
	case len(d) > 1:
		return "", &AdmitError{Namespace: namespace, Refusal: NoDefault,
			Detail: fmt.Sprintf("queues %s all list it in defaultForNamespaces; the job must name its queue", strings.Join(d, ", "))}
	}
	const name = "default"
	if err := t.Admit(name, namespace); err != nil {
		return "", &AdmitError{Queue: name, Namespace: namespace, Refusal: NoDefault, Detail: err.Error()}
	}
	return name, nil
}

func admits(namespaces []string, ns string) bool {
	if len(namespaces) == 0 {
		return true
	}
	for _, n := range namespaces {
		if n == ns {
			return true
		}
	}
	return false
}

// leavesUnder lists up to 5 leaves below node i, for messages.
func (t *Tree) leavesUnder(i int) string {
	var names []string
	more := 0
	for j := i + 1; j < len(t.nodes) && t.nodes[j].depth > t.nodes[i].depth; j++ {
		if !t.nodes[j].leaf {
			continue
		}
		if len(names) < 5 {
			names = append(names, t.nodes[j].spec.Name)
		} else {
			more++
		}
	}
	switch {
	case len(names) == 0:
		return "it has none: its children are invalid"
	case more > 0:
		return fmt.Sprintf("%s and %d more", strings.Join(names, ", "), more)
	}
	return strings.Join(names, ", ")
}
