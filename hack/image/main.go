// Command image builds corral's container image from scratch with
// go-containerregistry: no Docker daemon, no base image to pull, no
// registry at all. It takes a static corral binary and Debian's CA bundle
// and writes an OCI image layout and a tarball that `docker load`, `podman
// load`, `crane push` and `skopeo copy` all read. `make image` runs it;
// docs/kubernetes.md#building-the-image says how to push the result.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// defaultRepo is where releases are pushed; the chart and deploy/ name it.
const defaultRepo = "ghcr.io/corral-dev/corral"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var s Spec
	fs.StringVar(&s.Binary, "binary", "", "static corral binary to put in the image (CGO_ENABLED=0, version stamped)")
	fs.StringVar(&s.CACerts, "ca-certs", CAPath, "PEM bundle of CA certificates")
	fs.StringVar(&s.Version, "version", "", "the release the binary is stamped with; also the image's tag")
	fs.StringVar(&s.Revision, "revision", "", "VCS commit, for the org.opencontainers.image.revision label")
	fs.StringVar(&s.Source, "source", "https://github.com/corral-dev/corral", "source repository label")
	repo := fs.String("repo", defaultRepo, "image repository the tag belongs to")
	platform := fs.String("platform", "linux/amd64", "OS/ARCH of the binary")
	created := fs.Int64("created", 0, "Unix time to stamp files and the config with (the commit's time keeps builds reproducible)")
	layoutDir := fs.String("layout", "dist/oci", "OCI image layout directory to write (replaced)")
	tarPath := fs.String("tarball", "dist/corral-image.tar", "image tarball to write (docker load / crane push format)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if s.Binary == "" {
		return fmt.Errorf("-binary is required")
	}
	var ok bool
	if s.OS, s.Arch, ok = strings.Cut(*platform, "/"); !ok {
		return fmt.Errorf("-platform %q: want OS/ARCH, e.g. linux/amd64", *platform)
	}
	s.Created = time.Unix(*created, 0).UTC()
	tag, err := name.NewTag(*repo + ":" + s.Version)
	if err != nil {
		return fmt.Errorf("image name: %w", err)
	}
	img, err := Build(s)
	if err != nil {
		return err
	}

	if err := os.RemoveAll(*layoutDir); err != nil {
		return err
	}
	lp, err := layout.Write(*layoutDir, empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{
		// skopeo and umoci find the image by this (oci:dist/oci:TAG);
		// containerd's import by the full name.
		"org.opencontainers.image.ref.name": tag.TagStr(),
		"io.containerd.image.name":          tag.Name(),
	})); err != nil {
		return err
	}
	if err := tarball.WriteToFile(*tarPath, tag, img); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s (%s)\n  OCI layout: %s\n  tarball:    %s\n", tag.Name(), digest, *platform, *layoutDir, *tarPath)
	return nil
}
