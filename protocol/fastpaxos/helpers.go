package fastpaxos

import "sort"

func sortEntries(es []entry) { sort.Slice(es, func(i, j int) bool { return es[i].I < es[j].I }) }

func sortReports(rs []report) { sort.Slice(rs, func(i, j int) bool { return rs[i].acc < rs[j].acc }) }
