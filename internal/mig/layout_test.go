package mig

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestStarts checks every profile of every model against the starts the
// placement listing gives, one instance on an empty GPU at each slice.
func TestStarts(t *testing.T) {
	// By position in NVIDIA's table order: 1g, 1g+me, 1g with two memory
	// slices, 2g, 3g, 4g, 7g.
	want := [7][]int{{0, 1, 2, 3, 4, 5, 6}, {0, 1, 2, 3, 4, 5, 6}, {0, 2, 4, 6}, {0, 2, 4}, {0, 4}, {0}, {0}}
	names := map[string][7]string{
		"A100-40GB":  {"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"},
		"A100-80GB":  {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
		"H100-80GB":  {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
		"H200-141GB": {"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"},
	}
	for _, name := range []string{"A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB"} {
		m := model(t, name)
		for i, profile := range names[name] {
			t.Run(name+"/"+profile, func(t *testing.T) {
				var got []int
				for s := -1; s <= MemorySlices; s++ {
					err := m.Validate(Layout{{Profile: profile, Start: s}})
					if err == nil {
						got = append(got, s)
					} else if !errors.Is(err, ErrInvalidStart) {
						t.Errorf("%s@%d: %v, want nil or ErrInvalidStart", profile, s, err)
					}
				}
				if diff := cmp.Diff(want[i], got); diff != "" {
					t.Errorf("valid starts (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestValidate(t *testing.T) {
	a100 := model(t, "A100-40GB")
	cases := map[string]struct {
		layout []string
		want   error
	}{
		"an empty GPU":                   {},
		"a 7g alone":                     {layout: []string{"7g.40gb@0"}},
		"two 3g":                         {layout: []string{"3g.20gb@0", "3g.20gb@4"}},
		"4g, 2g, 1g":                     {layout: []string{"4g.20gb@0", "2g.10gb@4", "1g.5gb@6"}},
		"the guide's 3-2-1-1":            {layout: []string{"3g.20gb@4", "1g.5gb@0", "2g.10gb@2", "1g.5gb@1"}},
		"seven 1g":                       {layout: []string{"1g.5gb@0", "1g.5gb@1", "1g.5gb@2", "1g.5gb@3", "1g.5gb@4", "1g.5gb@5", "1g.5gb@6"}},
		"a 7g and a 1g overlap":          {layout: []string{"7g.40gb@0", "1g.5gb@6"}, want: ErrOverlap},
		"a 4g and a 3g at 0 overlap":     {layout: []string{"4g.20gb@0", "3g.20gb@0"}, want: ErrOverlap},
		"a wide 1g at 6 overlaps a 3g":   {layout: []string{"3g.20gb@4", "1g.10gb@6"}, want: ErrOverlap},
		"a 2g overlaps a 1g inside it":   {layout: []string{"1g.5gb@3", "2g.10gb@2"}, want: ErrOverlap},
		"two instances at one start":     {layout: []string{"1g.5gb@2", "1g.5gb@2"}, want: ErrOverlap},
		"a 1g cannot start at 7":         {layout: []string{"1g.5gb@7"}, want: ErrInvalidStart},
		"a 3g cannot start at 2":         {layout: []string{"3g.20gb@2"}, want: ErrInvalidStart},
		"a 4g cannot start at 4":         {layout: []string{"4g.20gb@4"}, want: ErrInvalidStart},
		"a 2g cannot start at 6":         {layout: []string{"2g.10gb@6"}, want: ErrInvalidStart},
		"a wide 1g cannot start at 1":    {layout: []string{"1g.10gb@1"}, want: ErrInvalidStart},
		"a negative start":               {layout: []string{"1g.5gb@-1"}, want: ErrInvalidStart},
		"an H100 profile on an A100 40G": {layout: []string{"3g.40gb@0"}, want: ErrUnknownProfile},
		"one media-extension 1g at most": {layout: []string{"1g.5gb+me@0", "1g.5gb+me@1"}, want: ErrTooMany},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := a100.Validate(lay(t, tc.layout...))
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Errorf("Validate = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestFree(t *testing.T) {
	a100 := model(t, "A100-40GB")
	cases := map[string]struct {
		layout []string
		want   []int
	}{
		"an empty GPU":                      {want: []int{0, 1, 2, 3, 4, 5, 6, 7}},
		"a 3g at 4 takes four slices":       {layout: []string{"3g.20gb@4"}, want: []int{0, 1, 2, 3}},
		"a wide 1g takes two":               {layout: []string{"1g.10gb@2"}, want: []int{0, 1, 4, 5, 6, 7}},
		"4g, 2g, 1g leave slice 7 stranded": {layout: []string{"4g.20gb@0", "2g.10gb@4", "1g.5gb@6"}, want: []int{7}},
		"a 7g takes all":                    {layout: []string{"7g.40gb@0"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, a100.Free(lay(t, tc.layout...))); diff != "" {
				t.Errorf("Free (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlace covers where Place puts an instance: the keep-the-largest rule,
// a 7g on an empty GPU only, two 3g, and the refusals.
func TestPlace(t *testing.T) {
	type want struct {
		start int
		ok    bool
	}
	cases := map[string]struct {
		model   string // default A100-40GB
		layout  []string
		profile string
		want    want
	}{
		"a 7g on an empty GPU":                            {profile: "7g.40gb", want: want{0, true}},
		"no 7g beside a 1g":                               {layout: []string{"1g.5gb@6"}, profile: "7g.40gb"},
		"no 7g beside a wide 1g":                          {layout: []string{"1g.10gb@0"}, profile: "7g.40gb"},
		"a first 3g goes to 4, the 4g stays placeable":    {profile: "3g.20gb", want: want{4, true}},
		"a second 3g goes to 0":                           {layout: []string{"3g.20gb@4"}, profile: "3g.20gb", want: want{0, true}},
		"no third 3g":                                     {layout: []string{"3g.20gb@0", "3g.20gb@4"}, profile: "3g.20gb"},
		"a 4g only at 0":                                  {layout: []string{"3g.20gb@4"}, profile: "4g.20gb", want: want{0, true}},
		"a 1g goes to 6: the 4g and a 3g stay placeable":  {profile: "1g.5gb", want: want{6, true}},
		"a 2g goes to 4: the 4g stays placeable":          {profile: "2g.10gb", want: want{4, true}},
		"a wide 1g goes to 6":                             {profile: "1g.10gb", want: want{6, true}},
		"beside a 2g at 4, a 1g takes 6 and keeps the 4g": {layout: []string{"2g.10gb@4"}, profile: "1g.5gb", want: want{6, true}},
		// The 4g is already lost: keep the 3g at 4 and both 2g starts at 2
		// and 4 by packing against the first 1g.
		"once the 4g is lost, a 1g packs beside the first": {layout: []string{"1g.5gb@0"}, profile: "1g.5gb", want: want{1, true}},
		"ties go to the lowest start":                      {layout: []string{"1g.5gb@6"}, profile: "1g.5gb", want: want{4, true}},
		"a 1g+me follows the same rule":                    {profile: "1g.5gb+me", want: want{6, true}},
		"one 1g+me per GPU":                                {layout: []string{"1g.5gb+me@6"}, profile: "1g.5gb+me"},
		"a full GPU":                                       {layout: []string{"4g.20gb@0", "3g.20gb@4"}, profile: "1g.5gb"},
		"slice 7 alone holds nothing":                      {layout: []string{"4g.20gb@0", "2g.10gb@4", "1g.5gb@6"}, profile: "1g.5gb"},
		"an unknown profile":                               {profile: "3g.40gb"},
		"a layout with an unknown profile":                 {layout: []string{"3g.40gb@0"}, profile: "1g.5gb"},
		"H100: a 1g.20gb goes to 6":                        {model: "H100", profile: "1g.20gb", want: want{6, true}},
		"H200: a first 3g goes to 4":                       {model: "H200", profile: "3g.71gb", want: want{4, true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := model(t, cmpOr(tc.model, "A100-40GB"))
			start, ok := m.Place(lay(t, tc.layout...), tc.profile)
			if got := (want{start, ok}); got != tc.want {
				t.Errorf("Place = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestPlaceOracle checks Place against a brute force built only on Validate:
// try every slice as a start, score each valid result by adding instances of
// each profile one at a time until Validate refuses, and keep the best.
func TestPlaceOracle(t *testing.T) {
	for _, m := range Models() {
		t.Run(m.Name, func(t *testing.T) {
			order := slices.Clone(m.Profiles)
			slices.SortStableFunc(order, func(a, b Profile) int {
				if a.Memory != b.Memory {
					return b.Memory - a.Memory
				}
				if a.Compute != b.Compute {
					return b.Compute - a.Compute
				}
				return strings.Compare(a.Name, b.Name)
			})
			rng := rand.New(rand.NewPCG(42, uint64(len(m.Name))))
			for trial := range 100 {
				l := randomLayout(m, rng)
				for _, p := range m.Profiles {
					wantStart, wantOK := brutePlace(m, order, l, p.Name)
					start, ok := m.Place(l, p.Name)
					if start != wantStart || ok != wantOK {
						t.Fatalf("trial %d: Place(%v, %s) = %d, %v; brute force %d, %v",
							trial, l, p.Name, start, ok, wantStart, wantOK)
					}
				}
			}
		})
	}
}

// randomLayout adds up to 7 random instances to an empty GPU, keeping those
// Validate accepts.
func randomLayout(m Model, rng *rand.Rand) Layout {
	l := Layout{}
	for range rng.IntN(8) {
		p := m.Profiles[rng.IntN(len(m.Profiles))]
		next := append(slices.Clone(l), Instance{Profile: p.Name, Start: rng.IntN(MemorySlices)})
		if m.Validate(next) == nil {
			l = next
		}
	}
	return l
}

func brutePlace(m Model, order []Profile, l Layout, profile string) (int, bool) {
	best, bestStart := []int(nil), 0
	for s := range MemorySlices {
		next := append(slices.Clone(l), Instance{Profile: profile, Start: s})
		if m.Validate(next) != nil {
			continue
		}
		var room []int
		for _, p := range order {
			n, cur := 0, next
			for added := true; added; {
				added = false
				for s2 := range MemorySlices {
					try := append(slices.Clone(cur), Instance{Profile: p.Name, Start: s2})
					if m.Validate(try) == nil {
						cur, added = try, true
						n++
						break
					}
				}
			}
			room = append(room, n)
		}
		if best == nil || slices.Compare(room, best) > 0 {
			best, bestStart = room, s
		}
	}
	return bestStart, best != nil
}
