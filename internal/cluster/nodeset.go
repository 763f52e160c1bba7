package cluster

import (
	"math/bits"
	"sync"
)

// NodeSet is a set of node indices of one State's layout, with prefix
// counts so that "how many members does domain d have" costs O(1): the
// placement search uses it to tell domains whose nodes are all eligible
// (plain aggregates serve), none (skipped) or some (walked node by node).
type NodeSet struct {
	words  []uint64
	prefix []int32 // prefix[i]: members among nodes [0, i)
}

// Has reports whether node n is in the set.
func (ns *NodeSet) Has(n int) bool {
	return n >= 0 && n/64 < len(ns.words) && ns.words[n/64]&(1<<uint(n%64)) != 0
}

// Len is the number of nodes in the set.
func (ns *NodeSet) Len() int { return int(ns.prefix[len(ns.prefix)-1]) }

// CountIn is the number of members among nodes [lo, hi).
func (ns *NodeSet) CountIn(lo, hi int) int { return int(ns.prefix[hi] - ns.prefix[lo]) }

// Each calls fn for every member in [lo, hi), in index order.
func (ns *NodeSet) Each(lo, hi int, fn func(n int)) {
	for w := lo / 64; w < len(ns.words) && w*64 < hi; w++ {
		word := ns.words[w]
		for word != 0 {
			n := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			if n >= lo && n < hi {
				fn(n)
			}
		}
	}
}

// nodeSetMemo keeps resolved node sets by their key for the life of a
// layout: every clone of a cycle's State shares it, so pods with the same
// constraints resolve their node names once per snapshot, not once per pod.
type nodeSetMemo struct {
	mu   sync.Mutex
	sets map[string]*NodeSet
}

// NodeSet returns the set of the named nodes. key identifies the list: a
// driver must give equal keys only to equal lists within one snapshot, and
// the result for a key is computed once per State layout (clones share it).
// Names the State does not know are left out.
func (s *State) NodeSet(key string, names []string) *NodeSet {
	m := &s.layout.nodeSets
	m.mu.Lock()
	defer m.mu.Unlock()
	if ns, ok := m.sets[key]; ok {
		return ns
	}
	n := len(s.nodes)
	ns := &NodeSet{words: make([]uint64, (n+63)/64), prefix: make([]int32, n+1)}
	for _, name := range names {
		if i, ok := s.nodeIndex[name]; ok {
			ns.words[i/64] |= 1 << uint(i%64)
		}
	}
	for i := 0; i < n; i++ {
		ns.prefix[i+1] = ns.prefix[i]
		if ns.words[i/64]&(1<<uint(i%64)) != 0 {
			ns.prefix[i+1]++
		}
	}
	if m.sets == nil {
		m.sets = map[string]*NodeSet{}
	}
	m.sets[key] = ns
	return ns
}
