package report

// seriesStyle is how one policy's curves look on every chart.
type seriesStyle struct {
	Colour string
	Width  float64
	Dash   string // solid | dashed
	Z      int    // drawing order: higher is on top
}

// corralPolicy is the policy the report is about: it is drawn wider, on top,
// and its table row is marked.
const corralPolicy = "corral"

// knownColours pins the colours of the policies corral sim runs, so a reader
// learns them once; corral's red stands out against the muted baselines.
var knownColours = map[string]string{
	corralPolicy: "#d62728",
	"spread":     "#4e79a7",
	"binpack":    "#59a14f",
}

// otherColours go to any other policy, in the order policies first appear.
var otherColours = []string{"#b07aa1", "#9c755f", "#f28e2b", "#76b7b2", "#edc948", "#bab0ac"}

// referenceStyle is for guide lines that are not a policy.
var referenceStyle = seriesStyle{Colour: "#999999", Width: 1, Dash: "dashed", Z: 1}

// policyStyles gives each policy of c its style; the same input always gets
// the same styles.
func policyStyles(c *comparison) map[string]seriesStyle {
	out := map[string]seriesStyle{}
	next := 0
	for _, p := range c.Policies {
		colour, ok := knownColours[p.Name]
		if !ok {
			colour = otherColours[next%len(otherColours)]
			next++
		}
		st := seriesStyle{Colour: colour, Width: 1.8, Dash: "solid", Z: 2}
		if p.Name == corralPolicy {
			st.Width, st.Z = 3.5, 3
		}
		out[p.Name] = st
	}
	return out
}
