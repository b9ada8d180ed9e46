package lab

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/durability/gen"
	"github.com/synod-dev/synod/internal/cli"
)

// `synod-lab durability gen`: the durability compiler (the Grid Services thesis IV.C.4,
// package durability/gen).
func init() {
	durCmd := &cobra.Command{
		Use:   "durability",
		Short: "Durability as a per-object attribute (seed 002 chapter IV): the durability compiler",
	}
	var o gen.Options
	var mapping string
	var check bool
	genCmd := &cobra.Command{
		Use:   "gen",
		Short: "Generate typed durability proxies and the service's rewiring from Go state objects and a mapping",
		Long: `Reads the state-object types (--object, repeated) and the service type (--service)
from the Go package in --dir, checks the mapping (--mapping, YAML) against them, and
writes --out (durable_gen.go) in that package: for each object an <Object>API interface,
<Object>Info, <Object>Proxy; for the service NewOriginal<Service>, NewDurable<Service>
and Durable<Service>, whose methods bracket the service's with startA/commitA.
With --check it only reports whether the file on disk is up to date.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(o.Objects) == 0 {
				return fmt.Errorf("durability gen: name at least one --object")
			}
			if mapping != "" {
				m, err := durability.LoadMapping(mapping)
				if err != nil {
					return err
				}
				o.Mapping = m
			}
			if check {
				stale, err := gen.Stale(o)
				if err != nil {
					return err
				}
				if stale {
					return fmt.Errorf("durability gen: %s/%s is stale; run synod-lab durability gen", o.Dir, o.Output)
				}
				fmt.Fprintln(cmd.OutOrStdout(), "up to date")
				return nil
			}
			path, err := gen.WriteFile(o)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "wrote", path)
			return nil
		},
	}
	genCmd.Flags().StringVar(&o.Dir, "dir", ".", "the Go package directory holding the types")
	genCmd.Flags().StringArrayVar(&o.Objects, "object", nil, "a state-object type (repeat)")
	genCmd.Flags().StringVar(&o.Service, "service", "", "the service type whose fields hold the objects' <Object>API")
	genCmd.Flags().StringVar(&mapping, "mapping", "", "a durability mapping (YAML) to validate against the objects")
	genCmd.Flags().StringVar(&o.Output, "out", gen.DefaultOutput, "the generated file's name, in --dir")
	genCmd.Flags().BoolVar(&check, "check", false, "only check that the generated file is up to date")
	durCmd.AddCommand(genCmd)
	cli.AddCommand(durCmd)
}
