package seed001

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// paramFlag adds --param PROTOCOL.KEY=VALUE (repeatable) to fs: protocol
// parameters of the clusters started for PROTOCOL (e.g. a lock lease).
func paramFlag(fs *pflag.FlagSet, dst *[]string) {
	fs.StringArrayVar(dst, "param", nil, "protocol parameter for the clusters of one protocol, PROTOCOL.KEY=VALUE (repeatable), e.g. abd.retransmit=20ms")
}

// parseParams turns --param values into parameters per protocol.
func parseParams(list []string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for _, s := range list {
		pk, v, ok := strings.Cut(s, "=")
		p, k, ok2 := strings.Cut(pk, ".")
		if !ok || !ok2 || p == "" || k == "" || v == "" {
			return nil, fmt.Errorf("--param %q: want PROTOCOL.KEY=VALUE", s)
		}
		if out[p] == nil {
			out[p] = map[string]string{}
		}
		out[p][k] = v
	}
	return out, nil
}

// formatParams lists m as "k v, k v" in key order.
func formatParams(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + m[k]
	}
	return strings.Join(parts, ", ")
}
