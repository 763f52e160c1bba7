package main

import (
	"strings"
	"testing"
	"time"
)

func TestWithInformation(t *testing.T) {
	cases := map[string]struct {
		trace, info string
		migSet      bool
		wantTrace   string
		wantMIG     time.Duration
		wantErr     string
	}{
		"realistic leaves the trace alone":   {trace: "gen:llm?jobs=800", info: "realistic", wantTrace: "gen:llm?jobs=800", wantMIG: time.Minute},
		"no-runtimes: nobody declares":       {trace: "gen:llm?jobs=800", info: "no-runtimes", wantTrace: "gen:llm?jobs=800&est=none", wantMIG: time.Minute},
		"oracle: exact, periodic, instant":   {trace: "gen:llm", info: "oracle", wantTrace: "gen:llm?est=exact&ckptspread=0&ckptjitter=0", wantMIG: -time.Second},
		"oracle keeps a given MIG time":      {trace: "gen:llm", info: "oracle", migSet: true, wantTrace: "gen:llm?est=exact&ckptspread=0&ckptjitter=0", wantMIG: time.Minute},
		"a contradicting trace parameter":    {trace: "gen:llm?est=hours", info: "oracle", wantErr: "sets est, which --trace gen:llm?est=hours sets too"},
		"other traces carry their own":       {trace: "openb:default", info: "no-runtimes", wantErr: "applies to the gen:llm generator"},
		"an unknown regime":                  {trace: "gen:llm", info: "psychic", wantErr: `--info "psychic": want realistic, no-runtimes or oracle`},
		"realistic on any trace is the norm": {trace: "openb:default", info: "realistic", wantTrace: "openb:default", wantMIG: time.Minute},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := withInformation(simOptions{trace: tc.trace, info: tc.info, migReconfigure: time.Minute}, tc.migSet)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.trace != tc.wantTrace || got.migReconfigure != tc.wantMIG {
				t.Errorf("trace %q, mig %v; want %q, %v", got.trace, got.migReconfigure, tc.wantTrace, tc.wantMIG)
			}
		})
	}
}
