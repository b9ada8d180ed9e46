package paxos

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/synod-dev/synod/automaton"
)

// Recovery: a replica rebuilds itself from its durable records (package
// doc, "Durability").

// OnStart rebuilds the replica from its records: promise, snapshot, log and
// chosen prefix; it re-executes the chosen log after the snapshot.
func (a *Paxos) OnStart(s automaton.Start) {
	a.reset()
	var commit uint64
	if v, ok := s.Records[recPromised]; ok {
		d, err := unmarshalBallotRec(v)
		if err != nil {
			panic(fmt.Sprintf("paxos: corrupt record %q: %v", recPromised, err))
		}
		a.promised = d
	}
	if v, ok := s.Records[recSnapshot]; ok {
		idx, err := a.ownMachine().restore(v)
		if err != nil {
			panic(fmt.Sprintf("paxos: corrupt snapshot record: %v", err))
		}
		a.snapIndex, a.executed, a.chosenUpTo = idx, idx, idx
		a.snapLen = len(v)
		a.logStart = idx + 1
		a.noteConf(a.sm.conf)
	}
	if v, ok := s.Records[recCommit]; ok {
		c, err := decodeUint(v)
		if err != nil {
			panic(fmt.Sprintf("paxos: corrupt record %q: %v", recCommit, err))
		}
		commit = c
		a.savedC = c
	}
	keys := make([]string, 0, len(s.Records))
	for k := range s.Records {
		if len(k) == len(recSlotPfx)+16 && k[:len(recSlotPfx)] == recSlotPfx {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	first := true
	for _, k := range keys {
		i, err := strconv.ParseUint(k[len(recSlotPfx):], 16, 64)
		if err != nil {
			panic(fmt.Sprintf("paxos: bad record key %q", k))
		}
		if i <= a.snapIndex {
			a.Emit(automaton.Persist{Key: k, Delete: true}) // left over from a truncation
			continue
		}
		sl, err := decodeSlot(s.Records[k])
		if err != nil {
			panic(fmt.Sprintf("paxos: corrupt record %q: %v", k, err))
		}
		if i <= commit {
			sl.chosen = true
		}
		a.log[i] = sl
		if first {
			a.logStart, first = i, false
		}
		if i > a.maxInst {
			a.maxInst = i
		}
	}
	if a.maxInst < a.snapIndex {
		a.maxInst = a.snapIndex
	}
	a.maxRound = a.promised.Round
	a.advance(false)
	// A node that may have acknowledged a leader's heartbeat before it
	// crashed honours that leader's lease for a full election timeout more.
	if len(s.Records) > 0 {
		a.leaderAlive = true
		a.Emit(automaton.SetTimer{ID: tmAlive, After: a.prm.ElectionTimeout}) // then the election's random part (onAliveTimeout)
	} else {
		a.armElection()
	}
	a.armTick()
	a.emitMembers()
}
