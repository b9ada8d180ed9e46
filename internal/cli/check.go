package cli

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/check"
	"github.com/synod-dev/synod/history"
)

func init() {
	var (
		htmlPath string
		opt      check.Options
	)
	cmd := &cobra.Command{
		Use:   "check history.json",
		Short: "Check a recorded history for linearizability (Porcupine)",
		Long: `Check loads a history written by the simulator, the live tests or the benchmark
driver and checks it for linearizability with Porcupine, one partition per KV key
(a Counter namespace is one partition). Writes of unknown outcome are modelled as
maybe applied. Reads are checked whatever their read mode.

It prints a summary and, when --html is given or the history is not linearizable,
writes Porcupine's visualization (by default next to the history, with an .html
extension). It exits non-zero unless the history is linearizable.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			h, err := history.Load(path)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if proto := h.Meta["protocol"]; !opt.IgnoreDelCount && automaton.HasRegisterSemantics(proto) {
				opt.IgnoreDelCount = true
				fmt.Fprintf(out, "protocol %s replicates registers: DEL reply counts are not checked\n", proto)
			}
			model := automaton.Linearizable
			if c, err := automaton.ConsistencyOf(h.Meta["protocol"]); err == nil {
				model = c
			}
			if model == automaton.EventuallySerializable {
				return fmt.Errorf("%s: protocol %s is eventually serializable; its check needs the replicas' final orders, which only the simulator has (synod-lab sim)", path, h.Meta["protocol"])
			}
			if model != automaton.Linearizable {
				fmt.Fprintf(out, "protocol %s promises %s consistency: checking that\n", h.Meta["protocol"], model)
			}
			checker := check.ForHistory(model, h)
			r, err := checker(h, opt)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%s%s\n", describeRun(path, h), r)

			if htmlPath == "" && r.Result != check.Ok {
				htmlPath = strings.TrimSuffix(path, filepath.Ext(path)) + ".html"
			}
			if htmlPath != "" {
				if err := r.WriteHTML(htmlPath); err != nil {
					fmt.Fprintf(out, "no visualization: %v\n", err)
				} else {
					what := "all partitions"
					switch r.Result {
					case check.Illegal:
						what = "failing partition " + r.FailedPartition
					case check.Unknown:
						what = "an undecided partition"
					}
					fmt.Fprintf(out, "Visualization of %s written to %s\n", what, htmlPath)
				}
			}
			switch r.Result {
			case check.Illegal:
				if r.Guarantee == check.GuaranteeSequential {
					return fmt.Errorf("%s: not sequentially consistent", path)
				}
				return fmt.Errorf("%s: not linearizable (partition %s)", path, r.FailedPartition)
			case check.Unknown:
				return fmt.Errorf("%s: check did not finish within %v", path, opt.Timeout)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&htmlPath, "html", "", "write Porcupine's HTML visualization to this file")
	f.DurationVar(&opt.Timeout, "timeout", 60*time.Second, "time limit for the whole check (0: none)")
	f.BoolVar(&opt.IgnoreDelCount, "ignore-del-count", false,
		"accept any DEL reply count (register protocols such as ABD cannot give a linearizable one)")
	f.StringToStringVar(&opt.Services, "service", nil,
		"service of a namespace, ns=counter (repeatable; namespaces not listed are kv)")
	rootCmd.AddCommand(cmd)
}

// describeRun names the history and its recorded attributes.
func describeRun(path string, h *history.History) string {
	if len(h.Meta) == 0 {
		return path + ": "
	}
	keys := make([]string, 0, len(h.Meta))
	for k := range h.Meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+h.Meta[k])
	}
	return fmt.Sprintf("%s (%s): ", path, strings.Join(parts, " "))
}
