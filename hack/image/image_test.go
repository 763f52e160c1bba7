package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const testVersion = "v9.9.9-imagetest"

var (
	buildOnce sync.Once
	builtPath string
	buildErr  error
)

// corralBinary builds the real corral command the way `make image` does
// (static, trimmed, version stamped), once per test run.
func corralBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "corral-image-test")
		if err != nil {
			buildErr = err
			return
		}
		builtPath = filepath.Join(dir, "corral")
		cmd := exec.Command("go", "build", "-trimpath",
			"-ldflags", "-s -w -X "+versionSymbol+"="+testVersion,
			"-o", builtPath, "./cmd/corral")
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = err
			t.Logf("go build: %s", out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building corral: %v", buildErr)
	}
	return builtPath
}

func TestImage(t *testing.T) {
	bin := corralBinary(t)
	dir := t.TempDir()
	layoutDir, tarPath := filepath.Join(dir, "oci"), filepath.Join(dir, "corral.tar")
	if err := run([]string{"-binary", bin, "-version", testVersion, "-revision", "abc123",
		"-platform", "linux/" + runtime.GOARCH, "-created", "1764000000",
		"-layout", layoutDir, "-tarball", tarPath}); err != nil {
		t.Fatal(err)
	}

	img := imageFromLayout(t, layoutDir, testVersion)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/corral"}) || !slices.Equal(c.Cmd, []string{"scheduler"}) {
		t.Errorf("entrypoint %q cmd %q, want [/usr/local/bin/corral] [scheduler]", c.Entrypoint, c.Cmd)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (nonroot, what the chart's runAsUser expects)", c.User)
	}
	if got := c.Labels["org.opencontainers.image.version"]; got != testVersion {
		t.Errorf("version label %q, want %q", got, testVersion)
	}
	if got := c.Labels["org.opencontainers.image.revision"]; got != "abc123" {
		t.Errorf("revision label %q, want abc123", got)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	// The Deployment's command is `corral scheduler ...`, found through PATH.
	if !slices.Contains(c.Env, "PATH=/usr/local/bin:/usr/bin:/bin") {
		t.Errorf("env %q: /usr/local/bin not on PATH", c.Env)
	}

	// The tarball holds the same image under the same name.
	tag, _ := name.NewTag("ghcr.io/corral-dev/corral:" + testVersion)
	fromTar, err := tarball.ImageFromPath(tarPath, &tag)
	if err != nil {
		t.Fatal(err)
	}
	// (The tarball's manifest is Docker's format, so compare what it points at.)
	if a, b := configName(t, img), configName(t, fromTar); a != b {
		t.Errorf("tarball image's config %s differs from the layout's %s", b, a)
	}

	files := filesystem(t, img)
	if h := files["usr/local/bin/corral"]; h.hdr == nil || h.hdr.Mode&0o111 == 0 {
		t.Fatalf("no executable /usr/local/bin/corral in the image")
	}
	if !bytes.Contains(files["etc/passwd"].body, []byte("nonroot:x:65532:65532:")) {
		t.Errorf("/etc/passwd has no nonroot user: %q", files["etc/passwd"].body)
	}
	if ca, _ := os.ReadFile(CAPath); !bytes.Equal(files["etc/ssl/certs/ca-certificates.crt"].body, ca) {
		t.Errorf("the image's CA bundle is not %s", CAPath)
	}
	if h := files["tmp"].hdr; h == nil || h.Mode != 0o1777 {
		t.Errorf("/tmp missing or not world-writable with the sticky bit")
	}

	// The binary taken out of the image runs and says its version.
	extracted := filepath.Join(dir, "corral-from-image")
	if err := os.WriteFile(extracted, files["usr/local/bin/corral"].body, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(extracted, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("corral version from the image: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "corral "+testVersion+" ") {
		t.Errorf("corral version printed %q, want it to start with %q", out, testVersion)
	}
}

// The same inputs give the same digest: a release can be rebuilt and checked.
func TestImageIsReproducible(t *testing.T) {
	s := Spec{Binary: corralBinary(t), CACerts: CAPath, Version: testVersion, OS: "linux", Arch: runtime.GOARCH}
	a, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	if digest(t, a) != digest(t, b) {
		t.Errorf("two builds of the same inputs differ: %s, %s", digest(t, a), digest(t, b))
	}
}

func TestBuildRefusesWhatCannotRun(t *testing.T) {
	bin := corralBinary(t)
	dynamic, err := exec.LookPath("ls") // Debian's ls needs libc's loader
	if err != nil {
		t.Fatal(err)
	}
	good := Spec{Binary: bin, CACerts: CAPath, Version: testVersion, OS: "linux", Arch: runtime.GOARCH}
	for _, tc := range []struct {
		name string
		edit func(*Spec)
		want string
	}{
		{"dynamically linked", func(s *Spec) { s.Binary = dynamic }, "dynamically linked"},
		{"other version", func(s *Spec) { s.Version = "v1.0.0" }, `stamped "` + testVersion + `"`},
		{"no version", func(s *Spec) { s.Version = "" }, "no version"},
		{"other platform", func(s *Spec) { s.Arch = "riscv64" }, "the image is linux/riscv64"},
		{"no CA bundle", func(s *Spec) { s.CACerts = filepath.Join(t.TempDir(), "none.pem") }, "CA certificates"},
		{"not an ELF", func(s *Spec) { s.Binary = CAPath }, "not an ELF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			tc.edit(&s)
			_, err := Build(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// `make image` tags ghcr.io/corral-dev/corral:VERSION; the chart (at its
// appVersion) and deploy/ must name that same image, or a release installs
// something else than it built.
func TestManifestsNameTheImage(t *testing.T) {
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join("../..", p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	field := func(text, re string) string {
		m := regexp.MustCompile(re).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("no match for %s", re)
		}
		return m[1]
	}
	fs := defaultRepo
	appVersion := field(read("charts/corral/Chart.yaml"), `(?m)^appVersion:\s*"?([^"\s]+)`)
	repo := field(read("charts/corral/values.yaml"), `(?m)^\s+repository:\s*(\S+)`)
	deployImage := field(read("deploy/deployment.yaml"), `(?m)^\s+image:\s*(\S+)`)
	if repo != fs {
		t.Errorf("chart image.repository %s, make image builds %s", repo, fs)
	}
	if want := fs + ":" + appVersion; deployImage != want {
		t.Errorf("deploy/deployment.yaml runs %s, the chart %s", deployImage, want)
	}
	if mk := field(read("Makefile"), `(?m)^IMAGE_REPO\s*\?=\s*(\S+)`); mk != fs {
		t.Errorf("Makefile IMAGE_REPO %s, the builder's default %s", mk, fs)
	}
}

func imageFromLayout(t *testing.T, dir, ref string) v1.Image {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range m.Manifests {
		if d.Annotations["org.opencontainers.image.ref.name"] == ref {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	t.Fatalf("no image named %s in %s", ref, dir)
	return nil
}

func digest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func configName(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

type tarFile struct {
	hdr  *tar.Header
	body []byte
}

// filesystem flattens the image's layers as a container runtime would.
func filesystem(t *testing.T, img v1.Image) map[string]tarFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]tarFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = tarFile{hdr: h, body: body}
	}
}
