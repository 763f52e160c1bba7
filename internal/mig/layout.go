package mig

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Instance is one GPU instance on a GPU: a profile at a placement start.
type Instance struct {
	Profile string
	Start   int // first memory slice
}

func (in Instance) String() string { return fmt.Sprintf("%s@%d", in.Profile, in.Start) }

// Layout is the set of GPU instances on one GPU, in no particular order.
type Layout []Instance

func (l Layout) String() string {
	parts := make([]string, len(l))
	for i, in := range l {
		parts[i] = in.String()
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// Errors Validate wraps; test for them with errors.Is.
var (
	ErrUnknownProfile = errors.New("unknown MIG profile")
	ErrInvalidStart   = errors.New("invalid placement start")
	ErrOverlap        = errors.New("instances overlap")
	ErrTooMany        = errors.New("too many instances of a profile")
)

// mask is a set of memory slices, bit i for slice i.
type mask uint8

// span is the memory slices profile p takes when it starts at start.
func (p *Profile) span(start int) mask {
	return mask((1<<p.Memory)-1) << start
}

// Validate reports the first problem of l, in instance order: a profile the
// model does not have, a start the profile cannot take, an instance whose
// memory slices overlap an earlier one, or more instances of a profile than
// one GPU can hold. A nil error means NVML could create every instance of l.
func (m Model) Validate(l Layout) error {
	counts := make([]int, len(m.Profiles))
	for i, in := range l {
		p := m.index(in.Profile)
		if p < 0 {
			return fmt.Errorf("%s: %w on %s", in, ErrUnknownProfile, m.Name)
		}
		prof := &m.Profiles[p]
		if !startOK(prof, in.Start) {
			return fmt.Errorf("%s: %w: %s starts at %v", in, ErrInvalidStart, prof.Name, prof.Starts)
		}
		for _, prev := range l[:i] {
			q := m.index(prev.Profile)
			if m.Profiles[q].span(prev.Start)&prof.span(in.Start) != 0 {
				return fmt.Errorf("%s: %w with %s", in, ErrOverlap, prev)
			}
		}
		counts[p]++
		if counts[p] > prof.MaxCount {
			return fmt.Errorf("%s: %w: at most %d of %s", in, ErrTooMany, prof.MaxCount, prof.Name)
		}
	}
	return nil
}

func startOK(p *Profile, start int) bool { return slices.Contains(p.Starts, start) }

// Free returns the memory slices no instance of l occupies, ascending.
// Instances of unknown profiles are ignored.
func (m Model) Free(l Layout) []int {
	used, _, _ := m.state(l)
	var free []int
	for i := range MemorySlices {
		if used&(1<<i) == 0 {
			free = append(free, i)
		}
	}
	return free
}

// state is the memory slices l occupies and its instance count per profile.
// ok is false when l holds an unknown profile, which state skips.
func (m Model) state(l Layout) (used mask, counts []int, ok bool) {
	counts = make([]int, len(m.Profiles))
	ok = true
	for _, in := range l {
		p := m.index(in.Profile)
		if p < 0 || in.Start < 0 || in.Start >= MemorySlices {
			ok = false
			continue
		}
		used |= m.Profiles[p].span(in.Start)
		counts[p]++
	}
	return used, counts, ok
}

// Place chooses where a new instance of profile goes on a GPU holding l,
// without moving any instance of l. ok is false if the profile is unknown,
// l holds an unknown profile, the GPU already has the profile's maximum
// count, or no valid start of the profile is free. l is assumed valid.
//
// The rule: among the free valid starts, take the one whose result leaves
// the most room for the largest profiles. Room is the headroom vector
// (see headroom): for each profile from the largest down, how many more
// instances of it the GPU could still take; vectors are compared
// lexicographically, and ties go to the lowest start. So a 1g on an empty
// A100 goes to start 6, keeping both the 4g (start 0) and a 3g placeable,
// and a lone 3g goes to start 4, keeping the 4g placeable.
func (m Model) Place(l Layout, profile string) (start int, ok bool) {
	p := m.index(profile)
	if p < 0 {
		return 0, false
	}
	used, counts, known := m.state(l)
	if !known || counts[p] >= m.Profiles[p].MaxCount {
		return 0, false
	}
	order := m.bySize()
	var best []int
	counts[p]++
	for _, s := range m.Profiles[p].Starts {
		span := m.Profiles[p].span(s)
		if used&span != 0 {
			continue
		}
		room := m.headroom(order, used|span, counts)
		if best == nil || slices.Compare(room, best) > 0 {
			start, best = s, room
		}
	}
	return start, best != nil
}

// bySize is the profile indexes from the largest to the smallest: more
// memory slices first, then more compute slices, then by name.
func (m Model) bySize() []int {
	order := make([]int, len(m.Profiles))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		pa, pb := &m.Profiles[a], &m.Profiles[b]
		return cmp.Or(
			cmp.Compare(pb.Memory, pa.Memory),
			cmp.Compare(pb.Compute, pa.Compute),
			strings.Compare(pa.Name, pb.Name),
		)
	})
	return order
}

// headroom is, for each profile in order, how many more instances of it a
// GPU whose memory slices used are taken could still hold on its own: its
// free valid starts, capped by its maximum count less those present. The
// valid starts of one profile never overlap each other, so every free one
// can be filled at once.
func (m Model) headroom(order []int, used mask, counts []int) []int {
	room := make([]int, len(order))
	for k, p := range order {
		prof := &m.Profiles[p]
		n := 0
		for _, s := range prof.Starts {
			if used&prof.span(s) == 0 {
				n++
			}
		}
		room[k] = min(n, max(prof.MaxCount-counts[p], 0))
	}
	return room
}

// ParseLayout reads instances written as "profile@start", separated by
// commas or spaces (e.g. "3g.40gb@0,3g.40gb@4"), as Layout.String and the
// node annotations write them. It checks the syntax only; Validate checks
// the layout against a geometry.
func ParseLayout(s string) (Layout, error) {
	l := Layout{}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '[' || r == ']' }) {
		p, st, ok := strings.Cut(f, "@")
		start, err := strconv.Atoi(st)
		if !ok || err != nil || p == "" {
			return nil, fmt.Errorf("instance %q: want <profile>@<start>", f)
		}
		l = append(l, Instance{Profile: p, Start: start})
	}
	return l, nil
}
