package main

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Information regimes (docs/simulator.md): what the scheduler is told about
// the jobs of a generated trace. realistic is the default; the others are
// the two ends issue 17 reports every quality figure under.
const (
	infoRealistic  = "realistic"   // 20% declare an over-estimated runtime, jittered checkpoints, MIG re-partitions take time
	infoNoRuntimes = "no-runtimes" // nobody declares a runtime; the rest as realistic
	infoOracle     = "oracle"      // exact runtimes, exactly periodic checkpoints, instantaneous MIG re-partitions
)

// generatorParams are the gen:llm parameters each regime sets.
var generatorParams = map[string][]string{
	infoNoRuntimes: {"est=none"},
	infoOracle:     {"est=exact", "ckptspread=0", "ckptjitter=0"},
}

// withInformation applies --info to the run's options: it adds the
// regime's parameters to a gen:llm trace and, for the oracle, makes MIG
// re-partitions instantaneous unless --mig-reconfigure was given
// (migSet). A regime other than realistic on another trace, or one that a
// parameter of the trace already contradicts, is an error: a figure
// labelled with a regime must have been measured under it.
func withInformation(o simOptions, migSet bool) (simOptions, error) {
	switch o.info {
	case "", infoRealistic:
		return o, nil
	case infoNoRuntimes, infoOracle:
	default:
		return o, fmt.Errorf("--info %q: want %s, %s or %s", o.info, infoRealistic, infoNoRuntimes, infoOracle)
	}
	name, query, _ := strings.Cut(o.trace, "?")
	if name != "gen:llm" {
		return o, fmt.Errorf("--info %s applies to the gen:llm generator; trace %s carries its own runtimes and checkpoints", o.info, o.trace)
	}
	given, err := url.ParseQuery(query)
	if err != nil {
		return o, fmt.Errorf("--trace %s: %w", o.trace, err)
	}
	params := generatorParams[o.info]
	for _, p := range params {
		k, _, _ := strings.Cut(p, "=")
		if given.Has(k) {
			return o, fmt.Errorf("--info %s sets %s, which --trace %s sets too: give one of them", o.info, k, o.trace)
		}
	}
	if query != "" {
		query += "&"
	}
	o.trace = name + "?" + query + strings.Join(params, "&")
	if o.info == infoOracle && !migSet {
		o.migReconfigure = -time.Second
	}
	return o, nil
}
