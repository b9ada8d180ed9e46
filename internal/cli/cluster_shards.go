package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/synod-dev/synod/cluster"
)

// shardRow is one replica group of a sharded namespace as the nodes
// report it (INFO shards: node/shard.go shardsInfo).
type shardRow struct {
	slots, nodes string
	leaders      map[string][]string // leader -> the members that report it
}

// printShards writes the sharded namespaces' groups and the placement
// namespace (#placement): slots, nodes and leader, as each group's live
// members report it ("-" when none does; a disagreement, as during an
// election, lists each answer with who gave it).
func printShards(out io.Writer, st []cluster.NodeStatus) {
	rows := map[string]*shardRow{}
	for _, s := range st {
		rep, ok := nodeInfo(s, "shards")
		if !ok {
			continue
		}
		for _, l := range strings.Split(string(rep.Str), "\n") {
			l = strings.TrimSpace(l)
			name, facts, ok := strings.Cut(l, ":")
			// "# Shards" heads the section; "#placement:..." is the
			// placement namespace's row.
			if !ok || strings.HasPrefix(l, "# ") {
				continue
			}
			f := map[string]string{}
			last := ""
			for _, kv := range strings.Split(facts, ",") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok && last != "" { // a slot set's next range: "slots=0-99,200-299"
					f[last] += "," + kv
					continue
				}
				f[k], last = v, k
			}
			r := rows[name]
			if r == nil {
				r = &shardRow{slots: f["slots"], nodes: f["nodes"], leaders: map[string][]string{}}
				rows[name] = r
			}
			if f["local"] == "1" && f["leader"] != "" {
				r.leaders[f["leader"]] = append(r.leaders[f["leader"]], s.ID)
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	names := make([]string, 0, len(rows))
	for n := range rows {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSLOTS\tNODES\tLEADER")
	for _, n := range names {
		r := rows[n]
		leader := "-"
		if len(r.leaders) == 1 {
			for l := range r.leaders {
				leader = l
			}
		} else if len(r.leaders) > 1 {
			var parts []string
			for l, by := range r.leaders {
				sort.Strings(by)
				parts = append(parts, fmt.Sprintf("%s (per %s)", l, strings.Join(by, " ")))
			}
			sort.Strings(parts)
			leader = strings.Join(parts, ", ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n, r.slots, r.nodes, leader)
	}
	tw.Flush()
}
