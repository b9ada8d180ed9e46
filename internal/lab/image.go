package lab

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/deploy/image"
	"github.com/synod-dev/synod/internal/cli"
)

func init() {
	var opts image.Options
	var out string
	cmd := &cobra.Command{
		Use:   "image --out DIR",
		Short: "Build Synod's container image from this source tree, without Docker",
		Long: `Compiles a static synod binary (CGO_ENABLED=0, linux/--arch) from the module
at --module and writes an OCI image around it on an empty base:

  DIR/oci        an OCI image layout  (skopeo copy oci:DIR/oci docker-daemon:synod:latest,
                 podman load -i, or crane push)
  DIR/synod.tar  a docker-loadable tarball (docker load -i DIR/synod.tar)

Entrypoint "synod node", user 65532, data in /var/lib/synod, the cluster file
and tls/ mounted under /etc/synod, ports 6379 (clients), 7000 (peers), 7400
(gRPC), 9100 (metrics). Needs the Go toolchain; deploy/Dockerfile builds the
same image with Docker. See docs/DEPLOY.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := image.Build(cmd.Context(), opts, out)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "image   %s\n", r.Digest)
			fmt.Fprintf(w, "layout  %s\n", r.Layout)
			fmt.Fprintf(w, "tarball %s (docker load -i %s; tag %s)\n", r.Tarball, r.Tarball, r.Tag)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "./synod-image", "directory to write the image to")
	f.StringVar(&opts.Module, "module", ".", "root of the Synod source tree to build")
	f.StringVar(&opts.Arch, "arch", "", "GOARCH of the image (default: this machine's)")
	f.StringVar(&opts.Version, "version", "", "version label and `synod --version` (default: git describe)")
	cli.AddCommand(cmd)
}
