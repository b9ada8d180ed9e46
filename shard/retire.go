package shard

import "fmt"

// Retiring an emptied created group (issue 33, session 49; decision 1b of
// Decide, docs/SHARDING.md "Group incarnations").
//
// Session 46 kept a created group that a merge emptied as a spare: its
// name could not be founded again, because a group is its name (its log,
// its storage, its members' numbers, the messages in flight to it), and a
// second group under the same name, on nodes that still hold the first
// one's log or that come back with it, would mix two histories. A group's
// identity is now its name and an incarnation: the runtime names every
// loop, record and message of incarnation i > 0 "<name>@<i>" (package
// config, IncSep), so two incarnations never exchange a message or share
// a record. Decide retires such a group: the runtime records the name
// unplaced at the next incarnation (one members-record write, the same
// compare-and-set as every other), every replica of the old incarnation
// stops and removes its records when it reads that, and the next split
// into the name creates a fresh group on the least loaded nodes, as for
// any unplaced name.
//
// Only a group a split created (GroupReport.Created) is retired: a group
// the cluster file declares has incarnation 0 forever (its nodes are the
// file's), and stays a spare when emptied.

// decideRetire returns the retirement of the first created group that
// owns no slots and has members.
func decideRetire(in PlaceInput) (Decision, bool) {
	for gi, g := range in.Groups {
		if !g.Created || len(g.Members) == 0 || owned(in.Map.Groups[gi]) > 0 {
			continue
		}
		return Decision{Kind: DecRetire, From: gi, Inc: g.Inc + 1,
			Reason: fmt.Sprintf("%s was created by a split and owns no slots: retired; its name is unplaced again, at incarnation %d", g.Name, g.Inc+1)}, true
	}
	return Decision{}, false
}
