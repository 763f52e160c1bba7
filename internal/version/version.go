// Package version says which corral is running: the release a binary was
// built from, for `corral version`, the simulator's reports and the
// scheduler's corral_build_info metric.
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// version is set by release builds:
//
//	go build -ldflags "-X github.com/corral-dev/corral/internal/version.version=v0.2.0" ./cmd/corral
//
// (make build and the image recipe do this from `git describe`). Left empty,
// Get falls back to what the Go toolchain recorded in the binary.
var version string

// Info describes the running binary.
type Info struct {
	// Version is the release (v0.2.0), the module version `go install
	// ...@v0.2.0` recorded, or "dev" for a build from a work tree.
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from, when the
	// toolchain recorded it (builds with -buildvcs=false do not); with
	// "-dirty" when the tree had local changes.
	Revision  string `json:"revision,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get reads the version once per call; it is cheap (the build info is in
// the binary) and has no failure mode: unknown parts are "dev" or empty.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(version, bi)
}

// String is the one-line form `corral version` prints.
func (i Info) String() string {
	s := i.Version
	if i.Revision != "" {
		s += " (" + i.Revision + ")"
	}
	return s + " " + i.GoVersion + " " + i.Platform
}

func fromBuildInfo(ldflags string, bi *debug.BuildInfo) Info {
	info := Info{Version: ldflags, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		if info.Version == "" {
			info.Version = "dev"
		}
		return info
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(info.Revision) > 12 {
		info.Revision = info.Revision[:12]
	}
	if dirty && info.Revision != "" {
		info.Revision += "-dirty"
	}
	if info.Version == "" {
		// "(devel)" is what a build inside the module's own tree records;
		// a pseudo-version (v0.0.0-2026...-abcdef) or a tag comes from
		// `go install module@version`.
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = strings.TrimSuffix(v, "+dirty")
		} else {
			info.Version = "dev"
		}
	}
	return info
}
