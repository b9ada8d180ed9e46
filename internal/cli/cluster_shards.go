package cli

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/synod-dev/synod/cluster"
)

// shardRow is one replica group of a sharded namespace as the nodes
// report it (INFO shards: node/shard.go shardsInfo).
type shardRow struct {
	slots, nodes string
	leaders      map[string][]string // leader -> the members that report it
	cross        int64               // cross-shard requests spanning it, routed by any node
}

// printShards writes the sharded namespaces' groups and the placement
// namespace (#placement): slots, nodes and leader, as each group's live
// members report it ("-" when none does; a disagreement, as during an
// election, lists each answer with who gave it), and the requests that
// spanned groups (CROSS: per group; then per namespace and pair of
// groups), summed over the nodes that routed them (INFO shards' cross=,
// INFO crossgroup; node/crossgroup.go).
func printShards(out io.Writer, st []cluster.NodeStatus) {
	rows := map[string]*shardRow{}
	infoRows(st, "shards", func(s cluster.NodeStatus, name string, f map[string]string) {
		r := rows[name]
		if r == nil {
			r = &shardRow{slots: f["slots"], nodes: f["nodes"], leaders: map[string][]string{}}
			rows[name] = r
		}
		if c, err := strconv.ParseInt(f["cross"], 10, 64); err == nil {
			r.cross += c
		}
		if f["local"] == "1" && f["leader"] != "" {
			r.leaders[f["leader"]] = append(r.leaders[f["leader"]], s.ID)
		}
	})
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
	fmt.Fprintln(tw, "GROUP\tSLOTS\tNODES\tLEADER\tCROSS")
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
		cross := "-"
		if !strings.HasPrefix(n, "#") {
			cross = strconv.FormatInt(r.cross, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n, r.slots, r.nodes, leader, cross)
	}
	tw.Flush()
	printCross(out, st)
}

// printCross writes, per sharded namespace, the requests that spanned
// groups (cross-shard transactions), those computed, and each pair of
// groups used together, summed over the nodes (INFO crossgroup).
func printCross(out io.Writer, st []cluster.NodeStatus) {
	sums := map[string]map[string]int64{}
	infoRows(st, "crossgroup", func(_ cluster.NodeStatus, ns string, f map[string]string) {
		if sums[ns] == nil {
			sums[ns] = map[string]int64{}
		}
		for k, v := range f {
			if c, err := strconv.ParseInt(v, 10, 64); err == nil {
				sums[ns][k] += c
			}
		}
	})
	names := make([]string, 0, len(sums))
	for ns := range sums {
		names = append(names, ns)
	}
	sort.Strings(names)
	for _, ns := range names {
		f := sums[ns]
		var pairs []string
		for k, v := range f {
			if strings.Contains(k, "+") {
				pairs = append(pairs, fmt.Sprintf("%s %d", k, v))
			}
		}
		sort.Strings(pairs)
		line := fmt.Sprintf("%s: %d requests spanned groups (%d computed)", ns, f["requests"], f["computed"])
		if len(pairs) > 0 {
			line += "; by pair: " + strings.Join(pairs, ", ")
		}
		fmt.Fprintln(out, line)
	}
}

// infoRows calls row for each row "<name>:<k>=<v>,..." of INFO section
// of every node that answers, with its facts ("# Section" heads a
// section; "#placement:..." is the placement namespace's row; a value
// with commas, such as a slot set "slots=0-99,200-299", is kept whole).
func infoRows(st []cluster.NodeStatus, section string, row func(s cluster.NodeStatus, name string, facts map[string]string)) {
	for _, s := range st {
		rep, ok := nodeInfo(s, section)
		if !ok {
			continue
		}
		for _, l := range strings.Split(string(rep.Str), "\n") {
			l = strings.TrimSpace(l)
			name, facts, ok := strings.Cut(l, ":")
			if !ok || strings.HasPrefix(l, "# ") {
				continue
			}
			f := map[string]string{}
			last := ""
			for _, kv := range strings.Split(facts, ",") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok && last != "" {
					f[last] += "," + kv
					continue
				}
				f[k], last = v, k
			}
			row(s, name, f)
		}
	}
}
