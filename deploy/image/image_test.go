package image

import (
	"archive/tar"
	"context"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestBuild builds the image from this repository into a temporary
// directory, reads both outputs back with go-containerregistry and checks
// the layers, the configuration, and that the binary extracted from the
// layer is static and answers `synod --version` with the version built in.
func TestBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the synod binary")
	}
	dir := t.TempDir()
	const version = "v9.8.7-test+x"
	opts := Options{Module: "../..", Version: version, Revision: "0123abcd"}
	r, err := Build(context.Background(), opts, dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Tag != "synod:v9.8.7-test-x" {
		t.Errorf("tag %q: a '+' must become '-'", r.Tag)
	}

	// The OCI layout: one image, OCI media types, the ref name annotation.
	p, err := layout.FromPath(r.Layout)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("layout holds %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if desc.MediaType != types.OCIManifestSchema1 || desc.Annotations["org.opencontainers.image.ref.name"] != "v9.8.7-test-x" {
		t.Errorf("layout descriptor %+v", desc)
	}
	if desc.Digest != r.Digest {
		t.Errorf("layout digest %s, Build reported %s", desc.Digest, r.Digest)
	}
	img, err := p.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	exe := checkImage(t, img, version)

	// The docker tarball holds the same image under its tag.
	timg, err := tarball.ImageFromPath(r.Tarball, nil)
	if err != nil {
		t.Fatal(err)
	}
	// (its manifest is rebuilt with Docker media types: compare the
	// configuration and the layer contents, not the manifest digest)
	c1, _ := img.ConfigName()
	c2, _ := timg.ConfigName()
	if c1 != c2 {
		t.Errorf("tarball image config %s, layout %s", c2, c1)
	}

	// Reproducible: the same binary and options give the same digest.
	again, err := FromBinary(exe, opts)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := again.Digest(); d != r.Digest {
		t.Errorf("rebuilt from the same binary: digest %s, first %s", d, r.Digest)
	}
}

// checkImage checks img's layers, configuration and files, runs the binary
// it holds, and returns the binary's path once extracted.
func checkImage(t *testing.T, img v1.Image, version string) string {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1 (scratch plus the binary)", len(layers))
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s", mt)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/synod", "node"}) {
		t.Errorf("entrypoint %q", c.Entrypoint)
	}
	if c.User != "65532:65532" || strings.HasPrefix(c.User, "0") {
		t.Errorf("user %q: want the non-root 65532:65532", c.User)
	}
	for _, p := range []string{"6379/tcp", "7000/tcp", "7400/tcp", "9100/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("port %s not exposed (%v)", p, c.ExposedPorts)
		}
	}
	if _, ok := c.Volumes[DataDir]; !ok || c.WorkingDir != DataDir {
		t.Errorf("volumes %v, working dir %q", c.Volumes, c.WorkingDir)
	}
	if c.Labels["org.opencontainers.image.version"] != version || c.Labels["org.opencontainers.image.revision"] != "0123abcd" ||
		c.Labels["org.opencontainers.image.source"] != Source || c.Labels["org.opencontainers.image.title"] != "synod" {
		t.Errorf("labels %v", c.Labels)
	}
	if cf.OS != "linux" || cf.Architecture == "" || c.StopSignal != "SIGTERM" {
		t.Errorf("os %q arch %q stop signal %q", cf.OS, cf.Architecture, c.StopSignal)
	}

	// The flattened filesystem: what is in it, with which owner and mode.
	files := map[string]*tar.Header{}
	var bin []byte
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		files[name] = h
		if name == "usr/local/bin/synod" {
			if bin, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, want := range map[string]struct {
		mode int64
		uid  int
	}{
		"usr/local/bin/synod": {0o755, 0},
		"var/lib/synod":       {0o700, UID},
		"etc/synod":           {0o755, 0},
		"etc/passwd":          {0o644, 0},
		"tmp":                 {0o1777, 0},
	} {
		h, ok := files[name]
		if !ok {
			t.Errorf("%s missing from the image", name)
			continue
		}
		if h.Mode != want.mode || h.Uid != want.uid {
			t.Errorf("%s: mode %o uid %d, want %o uid %d", name, h.Mode, h.Uid, want.mode, want.uid)
		}
	}
	for name := range files {
		if strings.HasPrefix(name, "etc/ssl") {
			t.Errorf("%s: the image carries no CA certificates", name)
		}
	}

	// The binary runs outside the image: static, and it knows its version.
	exe := filepath.Join(t.TempDir(), "synod")
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	ef, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("binary has an ELF interpreter: not static (CGO_ENABLED=0 lost?)")
		}
	}
	ef.Close()
	if cf.Architecture != runtime.GOARCH {
		t.Fatalf("image is %s, built for this machine (%s)", cf.Architecture, runtime.GOARCH)
	}
	out, err := exec.Command(exe, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("synod --version: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "synod version "+version {
		t.Errorf("synod --version printed %q, want %q", got, "synod version "+version)
	}
	return exe
}
