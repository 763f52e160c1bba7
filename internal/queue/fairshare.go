package queue

import (
	"math"
	"math/bits"
	"sort"
)

// FairShare divides the capacity among the queues, for each resource of
// capacity independently, given each leaf queue's demand (what its running
// and pending jobs ask for; demand named for inner or unknown queues is
// ignored). The result has an entry for every queue of the tree but the
// root; resources with a zero share are absent.
//
// A queue's effective demand is its own demand for a leaf, or the sum of its
// children's for an inner queue, capped by its limit. Level by level from
// the root, a parent's share is divided among its children:
//
//  1. Each child gets min(guarantee, effective demand): guarantee it does not
//     need is lent. If those claims add up to more than the parent's share
//     (only possible at the root, when capacity is below the guarantees, e.g.
//     after GPUs failed), the share is divided in proportion to the claims.
//  2. The rest is water-filled among children with unmet demand in
//     proportion to their weights: a child whose unmet demand is below its
//     portion gets exactly its demand, and what it leaves goes round again
//     among the others until nothing is left or nobody wants more.
//
// Shares are integers: portions are rounded down and the units left over go
// one each to the largest remainders, then in name order. So siblings with
// equal weights and equal unmet demand differ by at most one unit.
func (t *Tree) FairShare(capacity Amounts, demand map[string]Amounts) map[string]Amounts {
	out := make(map[string]Amounts, len(t.nodes)-1)
	for _, n := range t.nodes[1:] {
		out[n.spec.Name] = Amounts{}
	}
	eff := make([]int64, len(t.nodes))
	share := make([]int64, len(t.nodes))
	for _, r := range capacity.Resources() {
		// Effective demand, bottom up: children come after their parent.
		for i := len(t.nodes) - 1; i >= 0; i-- {
			n := &t.nodes[i]
			var e int64
			if n.leaf && i > 0 {
				e = max(0, demand[n.spec.Name][r])
			} else {
				for _, c := range n.children {
					e = satAdd(e, eff[c])
				}
			}
			if lim, ok := n.spec.Limit[r]; ok && e > lim {
				e = lim
			}
			eff[i] = e
		}
		// Shares, top down.
		share[0] = max(0, capacity[r])
		for i := range t.nodes {
			t.divide(i, share, eff, r)
		}
		for i, n := range t.nodes[1:] {
			if s := share[i+1]; s > 0 {
				out[n.spec.Name][r] = s
			}
		}
	}
	return out
}

// divide sets the shares of node i's children from node i's share.
func (t *Tree) divide(i int, share, eff []int64, r Resource) {
	ch := t.nodes[i].children
	if len(ch) == 0 {
		return
	}
	total := share[i]
	claim := make([]int64, len(ch))
	var claims int64
	for j, c := range ch {
		claim[j] = min(t.nodes[c].spec.Guarantee[r], eff[c])
		claims = satAdd(claims, claim[j])
	}
	if claims >= total {
		for j, v := range proportional(total, claim, claims) {
			share[ch[j]] = v
		}
		return
	}
	need := make([]int64, len(ch))
	weight := make([]float64, len(ch))
	for j, c := range ch {
		need[j] = eff[c] - claim[j]
		weight[j] = t.nodes[c].spec.WeightOf(r)
	}
	add := waterfill(total-claims, need, weight)
	for j, c := range ch {
		share[c] = claim[j] + add[j]
	}
}

// proportional divides total (<= sum) in proportion to the claims: each
// floor(total*claim/sum), then one unit each to the largest remainders,
// earlier index first on equal remainders. No share exceeds its claim.
func proportional(total int64, claim []int64, sum int64) []int64 {
	out := make([]int64, len(claim))
	if total <= 0 || sum <= 0 {
		return out
	}
	rem := make([]uint64, len(claim))
	left := total
	for j, c := range claim {
		hi, lo := bits.Mul64(uint64(total), uint64(c))
		q, rm := bits.Div64(hi, lo, uint64(sum)) // q <= total, so no overflow
		out[j], rem[j] = int64(q), rm
		left -= int64(q)
	}
	byRem := make([]int, len(claim))
	for j := range byRem {
		byRem[j] = j
	}
	sort.SliceStable(byRem, func(a, b int) bool { return rem[byRem[a]] > rem[byRem[b]] })
	// The remainders add up to left*sum, each below sum: at least left of
	// them are positive, and a positive one is below its claim.
	for _, j := range byRem[:left] {
		out[j]++
	}
	return out
}

// waterfill divides spare among children in proportion to weight, none
// getting more than its need, handing on what capped children leave.
func waterfill(spare int64, need []int64, weight []float64) []int64 {
	add := make([]int64, len(need))
	rem := append([]int64(nil), need...)
	var active []int
	for j, n := range rem {
		if n > 0 {
			active = append(active, j)
		}
	}
	for spare > 0 && len(active) > 0 {
		var w float64
		for _, j := range active {
			w += weight[j]
		}
		round := float64(spare) // portions are of the spare at the start of the round
		portion := func(j int) float64 { return round * weight[j] / w }
		// Children that want no more than their portion get all they want.
		var rest []int
		capped := false
		for _, j := range active {
			if float64(rem[j]) <= portion(j) && rem[j] <= spare {
				add[j] += rem[j]
				spare -= rem[j]
				rem[j] = 0
				capped = true
			} else {
				rest = append(rest, j)
			}
		}
		active = rest
		if capped {
			continue
		}
		// Nobody is capped: everyone gets the floor of its portion (below its
		// need, since the portion is), and the units rounding left go one
		// each to the largest fractions.
		floor := make([]int64, len(active))
		frac := make([]float64, len(active))
		var given int64
		for k, j := range active {
			p := portion(j)
			f := math.Floor(p)
			floor[k], frac[k] = int64(f), p-f
			given += floor[k]
		}
		for k := len(active) - 1; k >= 0 && given > spare; k-- { // float rounding: never give more than spare
			d := min(floor[k], given-spare)
			floor[k] -= d
			given -= d
		}
		for k, j := range active {
			add[j] += floor[k]
			rem[j] -= floor[k]
		}
		spare -= given
		order := make([]int, len(active))
		for k := range order {
			order[k] = k
		}
		sort.SliceStable(order, func(a, b int) bool { return frac[order[a]] > frac[order[b]] })
		for _, k := range order {
			if spare == 0 {
				break
			}
			if j := active[k]; rem[j] > 0 {
				add[j]++
				rem[j]--
				spare--
			}
		}
		rest = active[:0]
		for _, j := range active {
			if rem[j] > 0 {
				rest = append(rest, j)
			}
		}
		active = rest
	}
	return add
}
