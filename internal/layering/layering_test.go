package layering

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/corral-dev/corral/"

// Layers, from the bottom up. A package may import its own layer's model
// packages and any lower layer, never a higher one; the rules below spell
// out the cases that matter.
var (
	// model packages: what the cluster and the jobs are, placement search.
	model = set("internal/cluster", "internal/workload", "internal/mig", "internal/placement")
	// contract: the Snapshot, the Plan and the policy inputs they carry.
	contract = set("internal/cycle")
	// policies: each decides one thing and never imports the engine.
	policies = set("internal/queue", "internal/backfill", "internal/preempt", "internal/health")
	// engine: the cycle that runs the policies against the ledger.
	engine = set("internal/engine")
	// drivers carry a Plan out; they read the engine, the contract and the
	// model, never a policy directly.
	drivers = set("internal/kube", "internal/sim", "cmd/corral", "test/integration", "test/integration/framework", "test/integration/kit", "test/integration/soak")
)

type pkg struct {
	path    string   // relative to the module
	imports []string // direct imports, full paths
	deps    []string // every transitive dependency, full paths
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps=false",
		"-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .Deps \" \"}}", module+"...").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), "|", 3)
		if len(f) != 3 || !strings.HasPrefix(f[0], module) {
			continue
		}
		pkgs = append(pkgs, pkg{path: strings.TrimPrefix(f[0], module),
			imports: strings.Fields(f[1]), deps: strings.Fields(f[2])})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no package of the module")
	}
	return pkgs
}

// touchSources reads every Go file of the module. go test caches a passing
// result keyed by the files a test opened; go list runs in another process,
// so without this an import added anywhere would not invalidate a cached
// pass.
func touchSources(t *testing.T) {
	t.Helper()
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			_, err = os.ReadFile(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestLayers(t *testing.T) {
	touchSources(t)
	pkgs := listPackages(t)
	for _, p := range pkgs {
		pure := model[p.path] || contract[p.path] || policies[p.path] || engine[p.path]
		if pure {
			for _, d := range p.deps {
				if strings.HasPrefix(d, "k8s.io/") || strings.HasPrefix(d, "sigs.k8s.io/") {
					t.Errorf("%s depends on %s: engine packages must not know Kubernetes", p.path, d)
					break
				}
			}
		}
		for _, full := range p.imports {
			if !strings.HasPrefix(full, module) {
				continue
			}
			imp := strings.TrimPrefix(full, module)
			edge := p.path + " -> " + imp
			switch {
			case (model[p.path] || contract[p.path]) && (policies[imp] || engine[imp] || drivers[imp]):
				t.Errorf("%s: a model or contract package imports a layer above it", edge)
			case contract[p.path] && !model[imp]:
				t.Errorf("%s: the contract may name only model packages", edge)
			case policies[p.path] && (engine[imp] || drivers[imp]):
				t.Errorf("%s: a policy must not import the engine or a driver", edge)
			case policies[p.path] && policies[imp]:
				t.Errorf("%s: a policy reaches another only through an interface it declares", edge)
			case engine[p.path] && drivers[imp]:
				t.Errorf("%s: the engine must not import a driver", edge)
			case drivers[p.path] && policies[imp]:
				t.Errorf("%s: drivers read the engine, the contract and the model, not a policy", edge)
			}
		}
	}
}

func set(paths ...string) map[string]bool {
	m := map[string]bool{}
	for _, p := range paths {
		m[p] = true
	}
	return m
}
