package report

// seriesStyle is how one policy's curves look on every chart.
type seriesStyle struct {
	Colour string
	Width  float64
	Dash   string // solid | dashed | dotted
	// Opacity of the line, 0 meaning opaque.
	Opacity float64
	Z       int // drawing order: higher is on top
}

// corralPolicy is the policy the report is about: it is drawn wider, under
// the others.
const corralPolicy = "corral"

// knownColours pins the colours of the policies corral sim runs, so a reader
// learns them once; corral's red stands out against the muted baselines.
var knownColours = map[string]string{
	corralPolicy: "#d62728",
	"spread":     "#4e79a7",
	"binpack":    "#59a14f",
}

// dashes give each policy after the first its own line pattern, so that two
// policies with identical curves still show both: the thinner, patterned
// line is drawn over the wider one beneath it.
var dashes = []string{"dashed", "dotted", "solid"}

// otherColours go to any other policy, in the order policies first appear.
var otherColours = []string{"#b07aa1", "#9c755f", "#f28e2b", "#76b7b2", "#edc948", "#bab0ac"}

// referenceStyle is for guide lines that are not a policy.
var referenceStyle = seriesStyle{Colour: "#999999", Width: 1, Dash: "dashed", Z: 1}

// policyStyles gives each policy of c its style; the same input always gets
// the same styles.
func policyStyles(c *comparison) map[string]seriesStyle {
	out := map[string]seriesStyle{}
	next, baselines := 0, 0
	for _, p := range c.Policies {
		colour, ok := knownColours[p.Name]
		if !ok {
			colour = otherColours[next%len(otherColours)]
			next++
		}
		// corral is the widest line and lies at the bottom: on top it would
		// hide a baseline that drew the same curve.
		st := seriesStyle{Colour: colour, Width: 4, Dash: "solid", Z: 2}
		if p.Name != corralPolicy {
			st = seriesStyle{Colour: colour, Width: 2, Dash: dashes[baselines%len(dashes)], Z: 3}
			baselines++
		}
		out[p.Name] = st
	}
	return out
}
