package main

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Where things live in the image. The Deployment runs `corral scheduler`
// through PATH, so the binary's directory must be on it.
const (
	BinaryPath = "/usr/local/bin/corral"
	CAPath     = "/etc/ssl/certs/ca-certificates.crt"
	// NonrootUID is distroless' nonroot user, the one the chart's and
	// deploy's securityContext (runAsUser: 65532) expect.
	NonrootUID = 65532
	// versionSymbol is what `make build` and `make image` stamp with -X.
	versionSymbol = "github.com/corral-dev/corral/internal/version.version"
)

// Spec is what goes into the image.
type Spec struct {
	// Binary is a static corral binary built for OS/Arch, stamped with Version.
	Binary string
	// CACerts is a PEM bundle (Debian's ca-certificates) so the scheduler can
	// reach an API server behind a public CA.
	CACerts string
	// Version is the release the binary says it is (`corral version`); the
	// image's org.opencontainers.image.version label says the same.
	Version  string
	Revision string
	Source   string
	OS, Arch string
	// Created stamps every file and the config: a fixed time keeps the image
	// reproducible (the same inputs give the same digest).
	Created time.Time
}

// Build assembles the image from scratch: no base image to pull, no daemon.
// Layer one holds the OS files (users, CA bundle, /tmp, a home); layer two
// the binary, so a new release re-uploads only the binary.
func Build(s Spec) (v1.Image, error) {
	if err := checkBinary(s); err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(s.CACerts)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w (apt-get install ca-certificates)", err)
	}
	if !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("CA certificates: %s holds no PEM certificate", s.CACerts)
	}

	base := []entry{
		dir("etc/", 0o755), dir("etc/ssl/", 0o755), dir("etc/ssl/certs/", 0o755),
		file("etc/passwd", 0o644, []byte(fmt.Sprintf(
			"root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n",
			NonrootUID, NonrootUID))),
		file("etc/group", 0o644, []byte(fmt.Sprintf("root:x:0:\nnobody:x:65534:\nnonroot:x:%d:\n", NonrootUID))),
		file(strings.TrimPrefix(CAPath, "/"), 0o644, ca),
		dir("home/", 0o755), ownedDir("home/nonroot/", 0o700, NonrootUID),
		dir("root/", 0o700),
		dir("tmp/", 0o1777),
	}
	app := []entry{
		dir("usr/", 0o755), dir("usr/local/", 0o755), dir("usr/local/bin/", 0o755),
		file(strings.TrimPrefix(BinaryPath, "/"), 0o755, bin),
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, entries := range [][]entry{base, app} {
		layer, err := layerOf(entries, s.Created)
		if err != nil {
			return nil, err
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			return nil, err
		}
	}

	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = s.OS, s.Arch
	cf.Created = v1.Time{Time: s.Created}
	for i := range cf.History {
		cf.History[i].Created = cf.Created
		cf.History[i].CreatedBy = "corral hack/image"
	}
	cf.Config.Entrypoint = []string{BinaryPath}
	cf.Config.Cmd = []string{"scheduler"}
	cf.Config.User = fmt.Sprintf("%d:%d", NonrootUID, NonrootUID)
	cf.Config.WorkingDir = "/home/nonroot"
	cf.Config.Env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"SSL_CERT_FILE=" + CAPath,
		"HOME=/home/nonroot",
	}
	cf.Config.Labels = Labels(s)
	return mutate.ConfigFile(img, cf)
}

// Labels are the OCI annotations the image carries in its config.
func Labels(s Spec) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "corral",
		"org.opencontainers.image.description": "corral, a gang and topology scheduler for GPU jobs on Kubernetes",
		"org.opencontainers.image.version":     s.Version,
		"org.opencontainers.image.created":     s.Created.UTC().Format(time.RFC3339),
	}
	if s.Source != "" {
		l["org.opencontainers.image.source"] = s.Source
	}
	if s.Revision != "" {
		l["org.opencontainers.image.revision"] = s.Revision
	}
	return l
}

// checkBinary refuses a binary the image could not run or would mislabel:
// one that needs a dynamic loader (the image has no libc), one built for
// another platform, or one stamped with another version than the label.
func checkBinary(s Spec) error {
	if s.Version == "" {
		return fmt.Errorf("no version: the image is labelled with the binary's version")
	}
	f, err := elf.Open(s.Binary)
	if err != nil {
		return fmt.Errorf("%s: not an ELF binary: %w", s.Binary, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked: build it with CGO_ENABLED=0", s.Binary)
		}
	}
	bi, err := buildinfo.ReadFile(s.Binary)
	if err != nil {
		return fmt.Errorf("%s: no Go build info: %w", s.Binary, err)
	}
	settings := map[string]string{}
	for _, kv := range bi.Settings {
		settings[kv.Key] = kv.Value
	}
	if settings["GOOS"] != s.OS || settings["GOARCH"] != s.Arch {
		return fmt.Errorf("%s is built for %s/%s, the image is %s/%s", s.Binary, settings["GOOS"], settings["GOARCH"], s.OS, s.Arch)
	}
	if settings["CGO_ENABLED"] != "0" {
		return fmt.Errorf("%s was built with CGO_ENABLED=%q: build it with CGO_ENABLED=0", s.Binary, settings["CGO_ENABLED"])
	}
	// -trimpath keeps -ldflags out of the build info, so ask the binary.
	// A binary for another platform cannot be run here; its stamp is
	// trusted to be make image's.
	if s.OS != runtime.GOOS || s.Arch != runtime.GOARCH {
		return nil
	}
	out, err := exec.Command(s.Binary, "version", "-o", "json").Output()
	if err != nil {
		return fmt.Errorf("%s version: %w", s.Binary, err)
	}
	var info struct{ Version string }
	if err := json.Unmarshal(out, &info); err != nil {
		return fmt.Errorf("%s version -o json: %w", s.Binary, err)
	}
	if stamped := info.Version; stamped != s.Version {
		return fmt.Errorf("%s is stamped %q, the image would be labelled %q: build it with -ldflags '-X %s=%s'",
			s.Binary, stamped, s.Version, versionSymbol, s.Version)
	}
	return nil
}

type entry struct {
	hdr  tar.Header
	body []byte
}

func dir(name string, mode int64) entry { return ownedDir(name, mode, 0) }

func ownedDir(name string, mode int64, uid int) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: uid, Gid: uid}}
}

func file(name string, mode int64, body []byte) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body))}, body: body}
}

// layerOf writes the entries as one gzip'd OCI layer, every file stamped
// with the same time so the digest depends only on the contents.
func layerOf(entries []entry, created time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.hdr
		h.ModTime = created
		if err := tw.WriteHeader(&h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
