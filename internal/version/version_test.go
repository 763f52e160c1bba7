package version

import (
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	cases := map[string]struct {
		ldflags string
		bi      *debug.BuildInfo
		want    Info
	}{
		"no build info": {want: Info{Version: "dev"}},
		"work tree, no vcs stamp (-buildvcs=false)": {
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			want: Info{Version: "dev", GoVersion: "go1.26.8"},
		},
		"work tree with vcs stamp, dirty": {
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("0123456789abcdef0123", "true")},
			want: Info{Version: "dev", Revision: "0123456789ab-dirty", GoVersion: "go1.26.8"},
		},
		"go install at a tag": {
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.2.0"}},
			want: Info{Version: "v0.2.0", GoVersion: "go1.26.8"},
		},
		"go install at a commit": {
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261124160000-0123456789ab+dirty"}},
			want: Info{Version: "v0.0.0-20261124160000-0123456789ab", GoVersion: "go1.26.8"},
		},
		"ldflags win over the module version": {
			ldflags: "v0.3.0-rc.1",
			bi:      &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.2.0"}, Settings: vcs("abc", "false")},
			want:    Info{Version: "v0.3.0-rc.1", Revision: "abc", GoVersion: "go1.26.8"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := fromBuildInfo(tc.ldflags, tc.bi)
			if tc.want.GoVersion == "" {
				tc.want.GoVersion = got.GoVersion // the test binary's own toolchain
			}
			tc.want.Platform = got.Platform
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("fromBuildInfo (-want +got):\n%s", diff)
			}
		})
	}
}

func TestString(t *testing.T) {
	got := Info{Version: "v0.2.0", Revision: "abc", GoVersion: "go1.26.8", Platform: "linux/amd64"}.String()
	if want := "v0.2.0 (abc) go1.26.8 linux/amd64"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
