package queue

// qb builds a valid Spec in a line: q("team-a").Guarantee("gpu/H100", 8000).Weight(2).
// The default is a top-level leaf with no quota, weight 1.
type qb struct{ s Spec }

func q(name string) *qb { return &qb{s: Spec{Name: name}} }

func (b *qb) Parent(p string) *qb { b.s.Parent = p; return b }

func (b *qb) Guarantee(r Resource, v int64) *qb {
	if b.s.Guarantee == nil {
		b.s.Guarantee = Amounts{}
	}
	b.s.Guarantee[r] = v
	return b
}

func (b *qb) Limit(r Resource, v int64) *qb {
	if b.s.Limit == nil {
		b.s.Limit = Amounts{}
	}
	b.s.Limit[r] = v
	return b
}

// Weight sets the weight of every resource.
func (b *qb) Weight(w float64) *qb { return b.WeightOf(AllResources, w) }

func (b *qb) WeightOf(r Resource, w float64) *qb {
	if b.s.Weight == nil {
		b.s.Weight = map[Resource]float64{}
	}
	b.s.Weight[r] = w
	return b
}

func (b *qb) Priority(p int32) *qb { b.s.Priority = p; return b }

func (b *qb) Namespaces(ns ...string) *qb { b.s.Namespaces = ns; return b }

func (b *qb) Reclaim() *qb { b.s.Reclaim = true; return b }
func (b *qb) Strict() *qb  { b.s.Reclaim, b.s.StrictReclaim = true, true; return b }

func (b *qb) DefaultFor(ns ...string) *qb { b.s.DefaultFor = ns; return b }

func (b *qb) Problem(why string) *qb { b.s.Problem = why; return b }

func (b *qb) Obj() Spec { return b.s }

// specs turns builders into specs.
func specs(bs ...*qb) []Spec {
	out := make([]Spec, len(bs))
	for i, b := range bs {
		out[i] = b.Obj()
	}
	return out
}

const h100 = Resource("gpu/H100")

// gpus is n whole GPUs in GPU-milli.
func gpus(n int64) int64 { return n * 1000 }
