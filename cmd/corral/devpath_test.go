package main

import "testing"

func TestKubectlPath(t *testing.T) {
	cases := []struct {
		name, wd, corralBin, want string
	}{
		{"at the repository root", "/src/corral", "", "bin/kubectl"},
		{"elsewhere", "/home/me", "", "/src/corral/bin/kubectl"},
		{"binaries from $CORRAL_BIN", "/src/corral", "/opt/corral-bin", "/opt/corral-bin/kubectl"},
		{"$CORRAL_BIN elsewhere", "/home/me", "/opt/corral-bin/", "/opt/corral-bin/kubectl"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := kubectlPath("/src/corral", tc.wd, tc.corralBin); got != tc.want {
				t.Errorf("kubectlPath = %q, want %q", got, tc.want)
			}
		})
	}
}
