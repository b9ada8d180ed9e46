// Package image builds Synod's container image with Go alone, without a
// Docker engine (issue 19 item 7): `synod-lab image --out DIR` compiles a static
// synod binary (CGO_ENABLED=0) from the module and writes an OCI image with
// github.com/google/go-containerregistry, as
//
//	DIR/oci        an OCI image layout (skopeo copy oci:DIR/oci docker://…,
//	               podman load, crane push --image-refs, or docker load of a tar of it)
//	DIR/synod.tar  a `docker load`-able tarball tagged synod:<version>
//
// The image is what deploy/Dockerfile builds for those who have Docker:
// an empty (scratch) base plus one layer holding
//
//	/usr/local/bin/synod   the binary (static, stripped, -trimpath)
//	/etc/passwd, /etc/group  root and synod (uid/gid 65532), so that tools show a name
//	/etc/synod/            where the cluster file and tls/ are mounted
//	/var/lib/synod/        the data directory (owned by 65532, mode 0700), a volume
//	/tmp/                  mode 1777
//
// with entrypoint `synod node`, default arguments --help (a container is
// started as `… --config /etc/synod/cluster.yaml --id n1`), user
// 65532:65532, working directory /var/lib/synod, stop signal SIGTERM (the
// node drains and exits 0 on it), the ports of docs/DEPLOY.md exposed and the
// OCI labels (title, description, source, version, revision). No CA
// certificates: Synod trusts only its cluster CA, which is mounted.
//
// Builds are reproducible for a given binary: every timestamp (layer
// entries, image creation) is Options.Created, zero by default, so the same
// source gives the same digest.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Paths and identity inside the image.
const (
	BinaryPath = "/usr/local/bin/synod"
	ConfigDir  = "/etc/synod"
	DataDir    = "/var/lib/synod"
	UID        = 65532 // the conventional "nonroot" id of distroless images
	User       = "65532:65532"
	Source     = "https://github.com/synod-dev/synod"
)

// Ports are the ports a node listens on in the deployment guide
// (docs/DEPLOY.md): RESP clients, peers, gRPC clients, metrics.
var Ports = []string{"6379/tcp", "7000/tcp", "7400/tcp", "9100/tcp"}

// Options say what to build.
type Options struct {
	// Module is the root of the Synod module to build (default ".").
	Module string
	// Arch is the GOARCH of the binary and the image (default: this machine's).
	Arch string
	// Version and Revision label the image and are compiled into the binary
	// (`synod --version`); by default `git describe --always --dirty` and
	// `git rev-parse HEAD` in Module, or "dev" and "" without git.
	Version, Revision string
	// Created is every timestamp in the image (default: the zero time, for
	// reproducible digests).
	Created time.Time
}

// Result is what Write produced.
type Result struct {
	Layout  string  // the OCI image layout directory
	Tarball string  // the docker-loadable tarball
	Tag     string  // the tarball's tag
	Digest  v1.Hash // the image manifest's digest (the same in both)
}

func (o *Options) fill() {
	if o.Module == "" {
		o.Module = "."
	}
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", o.Module}, args...)...).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	if o.Version == "" {
		if o.Version = git("describe", "--always", "--dirty"); o.Version == "" {
			o.Version = "dev"
		}
	}
	if o.Revision == "" {
		o.Revision = git("rev-parse", "HEAD")
	}
}

// VersionSymbol is the variable `synod --version` prints, set at link
// time with -X (the server's command line lives in internal/cli, which
// cmd/synod's main runs).
const VersionSymbol = "github.com/synod-dev/synod/internal/cli.version"

// BuildBinary compiles ./cmd/synod of opts.Module into out: static
// (CGO_ENABLED=0), for linux/opts.Arch, stripped, -trimpath, with
// VersionSymbol set to opts.Version.
func BuildBinary(ctx context.Context, opts Options, out string) error {
	opts.fill()
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, goTool(), "build", "-trimpath",
		"-ldflags", "-s -w -X "+VersionSymbol+"="+opts.Version, "-o", abs, "./cmd/synod")
	cmd.Dir = opts.Module
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+opts.Arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("image: go build ./cmd/synod: %v\n%s", err, b)
	}
	return nil
}

// goTool is the go command of the running toolchain when there is one,
// else the one on PATH.
func goTool() string {
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return "go"
}

// FromBinary makes the image around the synod binary at bin.
func FromBinary(bin string, opts Options) (v1.Image, error) {
	opts.fill()
	exe, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	layerTar, err := rootFS(exe, opts.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: opts.Created},
			CreatedBy: "synod-lab image (deploy/image): synod " + opts.Version + " on an empty base",
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = opts.Arch, "linux"
	cf.Created = v1.Time{Time: opts.Created}
	ports := map[string]struct{}{}
	for _, p := range Ports {
		ports[p] = struct{}{}
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "synod",
		"org.opencontainers.image.description": "Synod: a replicated data service and a workbench for replication protocols",
		"org.opencontainers.image.source":      Source,
		"org.opencontainers.image.version":     opts.Version,
	}
	if opts.Revision != "" {
		labels["org.opencontainers.image.revision"] = opts.Revision
	}
	cf.Config = v1.Config{
		Entrypoint:   []string{BinaryPath, "node"},
		Cmd:          []string{"--help"},
		User:         User,
		WorkingDir:   DataDir,
		Env:          []string{"PATH=/usr/local/bin"},
		ExposedPorts: ports,
		Volumes:      map[string]struct{}{DataDir: {}},
		Labels:       labels,
		StopSignal:   "SIGTERM",
	}
	return mutate.ConfigFile(img, cf)
}

// rootFS is the image's single layer: the binary, the users, the
// configuration and data directories.
func rootFS(exe []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(p string, mode int64, uid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: mtime, Format: tar.FormatPAX})
	}
	file := func(p string, mode int64, body []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: int64(len(body)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nsynod:x:%d:%d:synod:%s:/sbin/nologin\n", UID, UID, DataDir)
	group := fmt.Sprintf("root:x:0:\nsynod:x:%d:\n", UID)
	steps := []func() error{
		func() error { return dir("etc", 0o755, 0) },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return dir("etc/synod", 0o755, 0) },
		func() error { return dir("tmp", 0o1777, 0) },
		func() error { return dir("usr", 0o755, 0) },
		func() error { return dir("usr/local", 0o755, 0) },
		func() error { return dir("usr/local/bin", 0o755, 0) },
		func() error { return file(strings.TrimPrefix(BinaryPath, "/"), 0o755, exe) },
		func() error { return dir("var", 0o755, 0) },
		func() error { return dir("var/lib", 0o755, 0) },
		func() error { return dir(strings.TrimPrefix(DataDir, "/"), 0o700, UID) },
		tw.Close,
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

var badTag = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// Write stores img under dir as an OCI image layout (dir/oci, replaced if
// present) and a docker-loadable tarball tagged synod:<version>
// (dir/synod.tar).
func Write(img v1.Image, dir, version string) (Result, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, err
	}
	r := Result{Layout: filepath.Join(dir, "oci"), Tarball: filepath.Join(dir, "synod.tar")}
	tag := badTag.ReplaceAllString(version, "-")
	if tag == "" || tag[0] == '.' || tag[0] == '-' {
		tag = "v" + tag
	}
	if len(tag) > 128 {
		tag = tag[:128]
	}
	r.Tag = "synod:" + tag
	ref, err := name.NewTag(r.Tag)
	if err != nil {
		return Result{}, err
	}
	if r.Digest, err = img.Digest(); err != nil {
		return Result{}, err
	}
	if err := os.RemoveAll(r.Layout); err != nil {
		return Result{}, err
	}
	p, err := layout.Write(r.Layout, empty.Index)
	if err != nil {
		return Result{}, err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag,
	})); err != nil {
		return Result{}, err
	}
	if err := tarball.WriteToFile(r.Tarball, ref, img); err != nil {
		return Result{}, err
	}
	return r, nil
}

// Build compiles the binary (in a temporary directory) and writes the image
// under dir.
func Build(ctx context.Context, opts Options, dir string) (Result, error) {
	opts.fill()
	tmp, err := os.MkdirTemp("", "synod-image-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "synod")
	if err := BuildBinary(ctx, opts, bin); err != nil {
		return Result{}, err
	}
	img, err := FromBinary(bin, opts)
	if err != nil {
		return Result{}, err
	}
	return Write(img, dir, opts.Version)
}
