package seed002durability

import (
	"fmt"
	"strings"

	"github.com/synod-dev/synod/experiment"
)

// seedResolution is the half-width of the seed's 95% interval on its Counter
// latencies (139 ± 0.3 ms): "essentially the same" is read as an added
// latency below it. The seed's ratios rest on a 139 ms SOAP base that hides
// what replication costs; the claims are judged on added milliseconds and on
// orderings, which do not depend on the base.
const seedResolution = 0.3

// Claims judges IV.D.1 on every run (--repeat, default 3) of each cell.
func (e *Counter) Claims(d experiment.Data) []experiment.Claim {
	var out []experiment.Claim
	bs, _ := beds(e.beds)
	orig, pb := [3]string{"original", "-", "-"}, [3]string{"pb", "-", "-"}
	for _, b := range bs {
		k := func(c [3]string, clients string) string { return counterCell(b, c, clients).Key }
		s := func(c [3]string, clients, m string) experiment.Sample { return d.Sample(k(c, clients), m) }
		text := fmt.Sprintf("IV.D.1 (%s): PB's add latency is \"essentially the same\" as the original's (one client): PB adds less than the seed's 0.3 ms resolution", b)
		paper := "139 vs ≈139 ms (±0.3)"
		if c, ok := d.NotRun(text, paper, k(orig, "1"), k(pb, "1")); ok {
			out = append(out, c)
		} else {
			cl := experiment.Claim{Text: text, Paper: paper, Judgement: experiment.DiffBelow("PB - original mean RTT (ms)", s(pb, "1", mLatency), s(orig, "1", mLatency), seedResolution)}
			cl.Cause = fmt.Sprintf("measured: original %.3f ms, PB %.3f ms (x%.1f)%s: the backup's acknowledgement of each buffer is on the add's path; the seed's 139 ms SOAP base made any such cost invisible as a ratio",
				d.Ours[k(orig, "1")][mLatency], d.Ours[k(pb, "1")][mLatency], d.Ours[k(pb, "1")][mLatency]/d.Ours[k(orig, "1")][mLatency], inNodeSplit(d, k(orig, "1"), k(pb, "1")))
			out = append(out, cl)
		}
		for _, c := range configs(e.databases) {
			if c[0] != "db" {
				continue
			}
			what := fmt.Sprintf("DB on %s, state fsync %s", c[1], c[2])
			text := fmt.Sprintf("IV.D.1 (%s): %s adds more latency than PB (the seed: +23%%, 171 vs 139 ms)", b, what)
			if cl, ok := d.NotRun(text, "+32 ms", k(c, "1"), k(pb, "1")); ok {
				out = append(out, cl)
			} else {
				cl := experiment.Claim{Text: text, Paper: "+32 ms (171 vs 139)",
					Judgement: experiment.RatioAbove("DB/PB mean RTT", s(c, "1", mLatency), s(pb, "1", mLatency), 1)}
				if cl.Verdict != experiment.Holds {
					cl.Cause = fmt.Sprintf("measured: DB %.3f ms, PB %.3f ms%s",
						d.Ours[k(c, "1")][mLatency], d.Ours[k(pb, "1")][mLatency], inNodeSplit(d, k(c, "1"), k(pb, "1")))
				}
				out = append(out, cl)
			}
			top := "1"
			for _, cr := range d.Cells {
				if cr.Status == experiment.StatusOK && cr.Get("bed") == b && atoi(cr.Get("clients")) > atoi(top) {
					top = cr.Get("clients")
				}
			}
			text = fmt.Sprintf("IV.D.1 (%s): %s's throughput is lower than the original's and PB's (%s clients)", b, what, top)
			if cl, ok := d.NotRun(text, "lower (Fig. IV.3)", k(c, top), k(orig, top), k(pb, top)); ok {
				out = append(out, cl)
			} else {
				out = append(out, experiment.Claim{Text: text, Paper: "lower (Fig. IV.3)", Judgement: experiment.AllOf(
					experiment.RatioBelow("DB/original throughput", s(c, top, mThrough), s(orig, top, mThrough), 1),
					experiment.RatioBelow("DB/PB throughput", s(c, top, mThrough), s(pb, top, mThrough), 1))})
			}
		}
		for _, c := range configs(e.databases) {
			text := fmt.Sprintf("Fig. IV.3 (%s, %s): throughput rises from 1 to 8 clients and stays within 15%% from 8 to 16", b, strings.Join(nonDash(c[:]), " "))
			if cl, ok := d.NotRun(text, "rises to 8, flat to 16", k(c, "1"), k(c, "8"), k(c, "16")); ok {
				cl.Cause = "client counts 8 and 16 not run (--quick runs 1 and 4)"
				out = append(out, cl)
				continue
			}
			out = append(out, experiment.Claim{Text: text, Paper: "rises to 8, flat to 16", Judgement: experiment.AllOf(
				experiment.RatioAbove("8/1 clients throughput", s(c, "8", mThrough), s(c, "1", mThrough), 1),
				experiment.RatioBelow("16/8 clients throughput", s(c, "16", mThrough), s(c, "8", mThrough), 1+tolFlat),
				experiment.RatioAbove("16/8 clients throughput", s(c, "16", mThrough), s(c, "8", mThrough), 1-tolFlat))})
		}
	}
	return out
}

// Claims judges IV.D.2's ordering (Fig. IV.6) per bed, database and
// interval, on every run of each cell.
func (e *Matchmaker) Claims(d experiment.Data) []experiment.Claim {
	var out []experiment.Claim
	bs, _ := beds(e.beds)
	for _, b := range bs {
		for _, db := range e.mmDatabases("db") {
			k := func(cfg, iv string) string {
				dd := db
				if cfg == "original" || cfg == "pb" {
					dd = "-"
				}
				return mmCell(b, cfg, dd, iv).Key
			}
			for _, iv := range e.ran {
				s := func(cfg string) experiment.Sample { return d.Sample(k(cfg, iv), mLatency) }
				text := fmt.Sprintf("IV.D.2 (%s, %s, state fsync %s, interval %s): PB+DB's jobSubmit latency lies between PB's and DB's", b, db, e.fsyncLabel(), iv)
				paper := "PB < PB+DB < DB (DB ≈ PB + 60 ms)"
				if c, ok := d.NotRun(text, paper, k("pb", iv), k("pbdb", iv), k("db", iv)); ok {
					out = append(out, c)
					continue
				}
				j := experiment.AllOf(experiment.RatioAbove("PB+DB/PB latency", s("pbdb"), s("pb"), 1),
					experiment.RatioBelow("PB+DB/DB latency", s("pbdb"), s("db"), 1))
				cl := experiment.Claim{Text: text, Paper: paper, Judgement: j}
				cl.Cause = mmCause(d, func(cfg string) string { return k(cfg, iv) })
				out = append(out, cl)
			}
		}
	}
	return out
}

// mmCause is where a jobSubmit's time goes in the four setups, measured
// (means): inside the nodes (request submitted to response released, the
// nodes' request_duration histograms) split into the database transaction
// (the durability.sql effect, timed by the node around its executor) and
// the rest (execution, the backups' acknowledgement with a replicated
// object, and the wait for earlier requests' transactions, which pbdurable
// issues one at a time in execution order), and outside (client, RESP,
// loopback). From those: the backups' acknowledgement (PB's time in the
// nodes beyond the original's) against what DB's second database object
// adds to each transaction.
func mmCause(d experiment.Data, key func(cfg string) string) string {
	var steps []string
	for _, cfg := range []string{"original", "pb", "pbdb", "db"} {
		m := d.Ours[key(cfg)]
		in, ok := m[mInNode]
		switch db, okDB := m[mDBCommit]; {
		case !ok:
			steps = append(steps, fmt.Sprintf("%s %.3f ms", cfg, m[mLatency]))
		case okDB && db > 0:
			steps = append(steps, fmt.Sprintf("%s %.3f ms = %.3f inside the nodes (%.3f database transaction + %.3f rest) + %.3f outside",
				cfg, m[mLatency], in, db, in-db, m[mOutside]))
		default:
			steps = append(steps, fmt.Sprintf("%s %.3f ms = %.3f inside the nodes + %.3f outside", cfg, m[mLatency], in, m[mOutside]))
		}
	}
	s := "where a jobSubmit's time goes (mean; inside the nodes: request submitted to response released, from their request_duration histograms, " +
		"the database transaction timed by the node around its durability.sql effect, the rest: execution, the backups' acknowledgement and the wait " +
		"for earlier requests' transactions, which run one at a time in execution order; outside: client, RESP, loopback): " + strings.Join(steps, "; ")
	orig, pb, pbdb, db := d.Ours[key("original")], d.Ours[key("pb")], d.Ours[key("pbdb")], d.Ours[key("db")]
	_, ok1 := orig[mInNode]
	_, ok2 := pb[mInNode]
	_, ok3 := pbdb[mDBCommit]
	_, ok4 := db[mDBCommit]
	if ok1 && ok2 && ok3 && ok4 {
		s += fmt.Sprintf(". Measured split: the backups' acknowledgement (PB's time in the nodes beyond the original's) %.3f ms; "+
			"the second database object (DB's transaction: AccountSet and MachineQueue, against PB+DB's: AccountSet and its commit decision, "+
			"a row of pbd_commit) adds %.3f ms per transaction (%.3f vs %.3f ms); the rest in the nodes PB+DB %.3f ms, DB %.3f ms. PB+DB − DB inside the nodes = %.3f ms: PB+DB lies between PB and DB "+
			"when the second object's cost, on its transaction and on the queue of transactions behind it, exceeds the acknowledgement, which PB+DB waits for "+
			"before its transaction (the presumed-abort commit, protocol/pbdurable)",
			pb[mInNode]-orig[mInNode], db[mDBCommit]-pbdb[mDBCommit], db[mDBCommit], pbdb[mDBCommit],
			pbdb[mInNode]-pbdb[mDBCommit], db[mInNode]-db[mDBCommit], pbdb[mInNode]-db[mInNode])
	}
	return s
}

// inNodeSplit is ", of which A and B ms inside the nodes" for live cells
// that timed their requests inside the nodes (request submitted to
// response released; the rest is the client, RESP and loopback).
func inNodeSplit(d experiment.Data, keys ...string) string {
	var parts []string
	for _, k := range keys {
		v, ok := d.Ours.Get(k, mInNode)
		if !ok {
			return ""
		}
		p := fmt.Sprintf("%.3f", v)
		if db, ok := d.Ours.Get(k, mDBCommit); ok && db > 0 {
			p += fmt.Sprintf(" (%.3f of it the database transaction)", db)
		}
		parts = append(parts, p)
	}
	return ", of which " + strings.Join(parts, " and ") + " ms inside the nodes (request submitted to response released; the database transaction timed by the node around its durability.sql effect)"
}
