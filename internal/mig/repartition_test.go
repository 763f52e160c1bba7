package mig

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRepartition(t *testing.T) {
	cases := map[string]struct {
		model string // default A100-40GB
		want  map[string]int
		got   []string // the layout; nil when none fits
		ok    bool
	}{
		"nothing":                {want: map[string]int{}, got: []string{}, ok: true},
		"zero counts ignored":    {want: map[string]int{"3g.20gb": 0}, got: []string{}, ok: true},
		"a 7g":                   {want: map[string]int{"7g.40gb": 1}, got: []string{"7g.40gb@0"}, ok: true},
		"two 3g":                 {want: map[string]int{"3g.20gb": 2}, got: []string{"3g.20gb@0", "3g.20gb@4"}, ok: true},
		"a lone 3g keeps the 4g": {want: map[string]int{"3g.20gb": 1}, got: []string{"3g.20gb@4"}, ok: true},
		"a 4g and a 3g":          {want: map[string]int{"4g.20gb": 1, "3g.20gb": 1}, got: []string{"4g.20gb@0", "3g.20gb@4"}, ok: true},
		// 3g at 0 leaves room for one 1g only (slice 7 takes none): the 3g
		// must go to 4.
		"the guide's 3-2-1-1": {
			want: map[string]int{"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2},
			got:  []string{"2g.10gb@0", "1g.5gb@2", "1g.5gb@3", "3g.20gb@4"}, ok: true,
		},
		"seven 1g": {
			want: map[string]int{"1g.5gb": 7},
			got:  []string{"1g.5gb@0", "1g.5gb@1", "1g.5gb@2", "1g.5gb@3", "1g.5gb@4", "1g.5gb@5", "1g.5gb@6"}, ok: true,
		},
		"six 1g and a 1g+me": {
			want: map[string]int{"1g.5gb": 6, "1g.5gb+me": 1},
			got:  []string{"1g.5gb@0", "1g.5gb@1", "1g.5gb@2", "1g.5gb@3", "1g.5gb@4", "1g.5gb@5", "1g.5gb+me@6"}, ok: true,
		},
		"three 2g and a wide 1g": {
			want: map[string]int{"2g.10gb": 3, "1g.10gb": 1},
			got:  []string{"2g.10gb@0", "2g.10gb@2", "2g.10gb@4", "1g.10gb@6"}, ok: true,
		},
		// 1g.10gb at 6 rather than 4 keeps a 2g placeable at 4.
		"a 4g and a wide 1g keep a 2g": {
			want: map[string]int{"4g.20gb": 1, "1g.10gb": 1},
			got:  []string{"4g.20gb@0", "1g.10gb@6"}, ok: true,
		},
		"H200: a 4g and a 2g": {
			model: "H200", want: map[string]int{"4g.71gb": 1, "2g.35gb": 1},
			got: []string{"4g.71gb@0", "2g.35gb@4"}, ok: true,
		},
		"two 4g":              {want: map[string]int{"4g.20gb": 2}},
		"a 7g and a 1g":       {want: map[string]int{"7g.40gb": 1, "1g.5gb": 1}},
		"two 3g and a 1g":     {want: map[string]int{"3g.20gb": 2, "1g.5gb": 1}},
		"a 4g, a 3g and a 1g": {want: map[string]int{"4g.20gb": 1, "3g.20gb": 1, "1g.5gb": 1}},
		"eight 1g":            {want: map[string]int{"1g.5gb": 7, "1g.5gb+me": 1}},
		"three 2g and two 1g": {want: map[string]int{"2g.10gb": 3, "1g.5gb": 2}},
		"two 1g+me":           {want: map[string]int{"1g.5gb+me": 2}},
		"an unknown profile":  {want: map[string]int{"3g.40gb": 1}},
		"a negative count":    {want: map[string]int{"1g.5gb": -1}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := model(t, cmpOr(tc.model, "A100-40GB"))
			got, ok := m.Repartition(tc.want)
			if ok != tc.ok {
				t.Fatalf("Repartition(%v) ok = %v, want %v (layout %v)", tc.want, ok, tc.ok, got)
			}
			var want Layout
			if tc.got != nil {
				want = lay(t, tc.got...)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Repartition(%v) (-want +got):\n%s", tc.want, diff)
			}
			if ok {
				if err := m.Validate(got); err != nil {
					t.Errorf("Repartition returned an invalid layout: %v", err)
				}
			}
		})
	}
}

func TestCanHost(t *testing.T) {
	a100 := model(t, "A100-40GB")
	cases := map[string]struct {
		layout  []string
		profile string
		place   bool // whether Place finds room without moving anything
		want    bool
	}{
		"a 4g beside a 1g at 0, once the 1g moves": {layout: []string{"1g.5gb@0"}, profile: "4g.20gb", want: true},
		"a 3g beside a 4g":                         {layout: []string{"4g.20gb@0"}, profile: "3g.20gb", place: true, want: true},
		"a 1g beside two 3g":                       {layout: []string{"3g.20gb@0", "3g.20gb@4"}, profile: "1g.5gb"},
		"a 7g beside anything":                     {layout: []string{"1g.5gb@6"}, profile: "7g.40gb"},
		"a second 4g":                              {layout: []string{"4g.20gb@0"}, profile: "4g.20gb"},
		"a 3g beside a 2g at 2 and a 1g at 6": {
			// No 3g start is free as placed, but 2g@0 1g@2 3g@4 fits.
			layout: []string{"2g.10gb@2", "1g.5gb@6"}, profile: "3g.20gb", want: true,
		},
		"an unknown profile": {profile: "3g.40gb"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := lay(t, tc.layout...)
			if got := a100.CanHost(l, tc.profile); got != tc.want {
				t.Errorf("CanHost = %v, want %v", got, tc.want)
			}
			if _, got := a100.Place(l, tc.profile); got != tc.place {
				t.Errorf("Place ok = %v, want %v", got, tc.place)
			}
		})
	}
}

// TestRepartitionHoldsEveryValidLayout: for random valid layouts, asking
// Repartition for the same instances must succeed, with a valid layout of the
// same instances that leaves at least as much headroom as the original.
func TestRepartitionHoldsEveryValidLayout(t *testing.T) {
	for _, m := range Models() {
		t.Run(m.Name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(len(m.Name))))
			order := m.bySize()
			for trial := range 200 {
				l := randomLayout(m, rng)
				want := map[string]int{}
				for _, in := range l {
					want[in.Profile]++
				}
				got, ok := m.Repartition(want)
				if !ok {
					t.Fatalf("trial %d: Repartition(%v) found nothing, but %v holds it", trial, want, l)
				}
				if err := m.Validate(got); err != nil {
					t.Fatalf("trial %d: Repartition(%v) = %v: %v", trial, want, got, err)
				}
				have := map[string]int{}
				for _, in := range got {
					have[in.Profile]++
				}
				if diff := cmp.Diff(want, have); diff != "" {
					t.Fatalf("trial %d: Repartition(%v) = %v (-want +got):\n%s", trial, want, got, diff)
				}
				usedL, counts, _ := m.state(l)
				usedG, _, _ := m.state(got)
				if slices.Compare(m.headroom(order, usedG, counts), m.headroom(order, usedL, counts)) < 0 {
					t.Errorf("trial %d: Repartition gave %v, with less headroom than %v", trial, got, l)
				}
			}
		})
	}
}
