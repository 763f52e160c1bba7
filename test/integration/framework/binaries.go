package framework

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// ModulePath is the main module; RepoRoot looks for its go.mod.
const ModulePath = "github.com/corral-dev/corral"

// MissingBinariesError is returned by StartCluster when the control-plane
// binaries (built by `make tools`) are not there.
type MissingBinariesError struct {
	BinDir  string
	Missing []string
}

func (e *MissingBinariesError) Error() string {
	return fmt.Sprintf("control-plane binaries missing in %s: %s; run `make tools` "+
		"(bash hack/tools/build.sh, ~10-15 min the first time) or point $CORRAL_BIN at a directory that has them",
		e.BinDir, strings.Join(e.Missing, ", "))
}

// binaries are the resolved paths StartCluster uses.
type binaries struct {
	dir                  string
	etcd, apiserver, kcm string
	scheduler, kwok      string
	kwokStages           []string
}

// BinDir returns where the control-plane binaries are looked up:
// $CORRAL_BIN if set, else <repo root>/bin.
func BinDir() (string, error) {
	if d := os.Getenv("CORRAL_BIN"); d != "" {
		return filepath.Abs(d)
	}
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("cannot find the corral repository root (set $CORRAL_BIN): %w", err)
	}
	return filepath.Join(root, "bin"), nil
}

// RepoRoot walks up from the working directory (and then from this source
// file's directory) to the directory whose go.mod declares ModulePath. If no
// such go.mod exists, the first go.mod found above the working directory is
// used.
func RepoRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	firstAny := ""
	for _, start := range starts {
		for dir := start; ; dir = filepath.Dir(dir) {
			gomod := filepath.Join(dir, "go.mod")
			if _, err := os.Stat(gomod); err == nil {
				if modulePathOf(gomod) == ModulePath {
					return dir, nil
				}
				if firstAny == "" {
					firstAny = dir
				}
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	if firstAny != "" {
		return firstAny, nil
	}
	return "", errors.New("no go.mod found above the working directory")
}

func modulePathOf(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "module"); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

func findBinaries(opts Options) (*binaries, error) {
	dir := opts.BinDir
	if dir == "" {
		var err error
		if dir, err = BinDir(); err != nil {
			return nil, err
		}
	}
	b := &binaries{
		dir:       dir,
		etcd:      filepath.Join(dir, "etcd"),
		apiserver: filepath.Join(dir, "kube-apiserver"),
		kcm:       filepath.Join(dir, "kube-controller-manager"),
		scheduler: filepath.Join(dir, "kube-scheduler"),
		kwok:      filepath.Join(dir, "kwok"),
	}
	need := []string{b.etcd, b.apiserver, b.kcm, b.kwok}
	if opts.KubeScheduler {
		need = append(need, b.scheduler)
	}
	var missing []string
	for _, p := range need {
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, filepath.Base(p))
		}
	}
	stages, _ := filepath.Glob(filepath.Join(dir, "kwok-stages", "*.yaml"))
	sort.Strings(stages)
	if len(stages) == 0 {
		missing = append(missing, "kwok-stages/*.yaml")
	}
	if len(missing) > 0 {
		return nil, &MissingBinariesError{BinDir: dir, Missing: missing}
	}
	b.kwokStages = append(stages, opts.ExtraKwokStages...)
	return b, nil
}
