package cli

import "runtime/debug"

// version is set at link time (-X github.com/synod-dev/synod/internal/cli.version=…, image.VersionSymbol) by `synod-lab image` and
// deploy/Dockerfile; otherwise it comes from the build information.
var version string

func init() {
	rootCmd.Version = version
	if rootCmd.Version == "" {
		rootCmd.Version = "devel"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			rootCmd.Version = bi.Main.Version
		}
	}
}
