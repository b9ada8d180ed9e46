package lab

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/explore"
	"github.com/synod-dev/synod/internal/cli"
	"github.com/synod-dev/synod/mc"
)

// `synod-lab explore`: the web explorer (package explore).
func init() {
	var protocol, tracePath, addr string
	var noPrefix bool
	cmd := &cobra.Command{
		Use:   "explore",
		Short: "Serve a local web page to step through a protocol's model by hand, or through a saved counterexample",
		RunE: func(cmd *cobra.Command, args []string) error {
			var t *mc.Trace
			if tracePath != "" {
				var err error
				if t, err = mc.LoadTrace(tracePath); err != nil {
					return err
				}
			} else {
				if _, err := automaton.LookupAny(protocol); err != nil {
					return err
				}
				cfg := mc.NewConfig(protocol)
				if noPrefix {
					cfg.Model.Prefix = nil
				}
				var err error
				if t, err = mc.StartTrace(cfg); err != nil {
					return err
				}
			}
			s, err := explore.New(t)
			if err != nil {
				return err
			}
			defer s.Close()
			if tracePath == "" {
				// Hand-driven: start where the model checker's search
				// starts, after the model's scripted prefix (step back
				// through it with the page's controls).
				s.Seek(t.Prefix)
			}
			ln, err := s.Listen(addr)
			if err != nil {
				return err
			}
			fmt.Printf("explorer on http://%s/ (Ctrl-C stops)\n", ln.Addr())
			return http.Serve(ln, s.Handler())
		},
	}
	f := cmd.Flags()
	f.StringVar(&protocol, "protocol", automaton.DefaultProtocol, "protocol (or broken variant) whose model to explore by hand")
	f.StringVar(&tracePath, "trace", "", "counterexample file saved by `synod-lab mc --out`")
	f.BoolVar(&noPrefix, "no-prefix", false, "start from the initial state, without the model's scripted prefix")
	f.StringVar(&addr, "addr", "127.0.0.1:8090", "loopback address to serve on")
	cli.AddCommand(cmd)
}
