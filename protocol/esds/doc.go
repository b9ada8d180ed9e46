// Package esds implements the eventually-serializable data service of the ESDS thesis
// (Cheiner, "Implementation and Evaluation of an Eventually-Serializable Data
// Service", MIT 1997, after Fekete, Gupta, Luchangco, Lynch and Shvartsman,
// PODC 1996) over any service.Service (Counter, String, KV, ...).
//
// Protocols: "esds" is ESDSOptAlg (Fig. 4.5: incremental gossip, no
// self-gossip with solidify for one replica, memoised stable state);
// "esds-unopt" is ESDSAlg (Figs. 4.1, 4.2: full-state gossip, values
// recomputed from the initial state every time, no garbage collection). The
// parameter variant=opt|unopt selects either under any name. Other parameters:
// gossip (interval, or off), retransmit, batch, drain (stream cadence),
// stability (stable here as a prefix label or as positions),
// values=memo|recompute, removed;
// gossip=off and values=recompute exist for the ESDS thesis's experiments
// (experiments.go). impl=optimised|simple is the seed's configuration
// switch between communication methods (§4.2.5, below).
//
// # Roles
//
// One automaton per node plays both roles, each with its own state and
// actions. The front end (Fig. 4.1, frontend.go) is the node the client
// reached. It keeps wait_f (the operations submitted and not yet answered,
// with the client requests waiting for each: a retry at the same node joins)
// and rept_f (responses received while waiting). send_{f,r}("request", x)
// goes to replicas chosen by the send policy below, and each send counts in
// the operation's per-replica send counter (§4.2.4); the local replica is
// reached without a network hop. receive_{r,f}("response", x, v) keeps v in
// rept_f only while x is waiting, and response_c(x, v) answers with the first
// value received, dropping x from wait_f and every value of x from rept_f
// (response_c is taken in the step that receives the first value, so rept_f
// is empty between steps and is not stored: frontend.go receiveResponse). A
// retry at another node is another front end submitting the same operation.
// The replica's pending_r records, per operation, which front ends (a bit per
// node) wait for its response.
//
// The send policy (§4.2.4 discusses trade-offs and leaves it open): send=1
// (default: the front end's own replica, as before; lowest load),
// send=2 (its own and the next in the ring of replica ids: a fast answer
// when one is slow, twice the requests) or send=all. resend (off by default:
// the channels the simulator and the runtime give ESDS are retransmitted at
// the stream layer only for gossip, and a client retries at another node)
// sends a waiting operation, every resend interval, to the next replica in
// the ring whose counter is below maxsends: the seed's "resend under a cap".
// The local replica is sent to once (a local submission cannot be lost).
//
// Front-end-only nodes (frontend_only.go). §4.2.4 draws the front end as an
// automaton of its own that reaches replicas over channels; it is silent on
// where front ends run. Decision: parameter replicas names the nodes that
// hold replicas (empty: every node); any other node of the namespace runs
// the front end only. It keeps wait_f, rept_f and the send counters and
// nothing else, persists nothing (a crash forgets wait_f; the client's
// retry, same operation id, starts the operation again), and starts its
// ring of sends at the replica at position (its own position mod the number
// of replicas) among the replicas, so that several such nodes spread their
// load. Replicas gossip, reserve and count stability among replicas only; a
// replica accepts only requests from a front-end-only node, which accepts
// only responses. The simulator asks only replicas (IsReplica) for their
// final order, and the invariants look only at replicas.
//
// The replica keeps pending, rcvd (the operation table), done_r[i] and solid_r[i]
// (a bit per replica on each operation), minlabel_r (one label per operation;
// an operation has a label iff it is in done_r[r]) and lbl-counter_r.
//
//   - do_it (x, l): when x is received, not done, and every id in x.prev is done
//     here (or garbage-collected), label it (counter+1, r). The counter is
//     advanced past the counter of every label seen, so the new label exceeds
//     every label in done_r[r] (notes §1.4: the seed needs this and does not
//     say it).
//   - gossip merge: rcvd ∪= R; done[r'], done[r] ∪= D ∪ S; done[i] ∪= S;
//     labels by minimum; solid[r'] ∪= S; solid[r] ∪= S ∪ ⋂ done (Fig. 4.2).
//   - response: non-strict operations once done here, with val_r(x) in the
//     current label order; strict ones once x ∈ ⋂_i solid_r[i], with
//     stable-value_r(x).
//
// Operation ids: the request option opid (automaton.OptOpID), or, when a
// request carries none, AssignedOpID(RequestID) = "<client as 16 hex
// digits>-<seq>" (the edges fill in the same id from the option's Assign;
// options.go declares the options and their validation). A retry carries the
// same id, so it joins the one operation: IdempotentRetry is true. Ids are
// the client's responsibility (seed §4.2.2): two different operations under
// one id are one operation (the first descriptor a replica sees wins). An
// operation naming itself in prev is refused, and so is one whose prev ids
// lead back to it through the prev sets of operations received here and not
// yet done (a cycle: none of them could ever be done). The ESDS thesis lets do_it
// wait for prev without bound (§4.2.2, Fig. 4.2); an id that is never
// submitted hung the client for ever (issue 29). Decision: the front end
// answers an error naming the missing ids once an operation has waited
// prev_timeout (default 10s) with its prev set not all done at its node's
// replica (frontend.go expirePrevWaits). The outcome is then unknown to the
// client: the operation stays received at the replicas and is done if the ids
// arrive later. Read modes (Options.Read) do
// not apply: ESDS has no linearizable read; per-request consistency is the
// strict option. Atomic groups (Request.Ops) and interactive transaction
// steps (Request.Txn) are refused before anything is applied: the replicas
// label operations one by one, and nothing keeps a group together.
// Nondeterministic services are refused at configuration time (the
// protocol does not implement automaton.NondeterminismSupport): every
// replica applies every operation itself.
//
// # Files
//
//   - esds.go: registration, parameters, the automaton's state, Step.
//   - request.go: request_c(x): the descriptor from the request (Fig. 4.1).
//   - frontend.go: the front end (Fig. 4.1) and the replica's
//     receive_{f,r}("request", x) / send_{r,f}("response", x, v) ends;
//     frontend_only.go: nodes that run a front end and no replica.
//   - apply.go: do_it, the stable-state advance, send_{r,f}("response").
//   - gossip.go: send_{r,r'}("gossip") and receive_{r',r}("gossip").
//   - stream.go: the reliable stream layer under incremental gossip (§6.2).
//   - stable_prefix.go: stability=prefix, the stable prefix a stream
//     message carries in place of a position per operation stable here.
//   - reserve.go, combination.go: impl=simple, SimpleESDSImpl's gossip by
//     I/O combinations under the reservation system (§3.3.4, §3.3.5, §3.4.3).
//   - gc.go, membership.go, store.go (records, restart), index.go.
//   - options.go: the request options; invariant.go: the invariants.
//
// # How the seed's gaps and typos are resolved
//
//   - Replica ids are 0..N-1, the positions in the node list (§4.2.3), not
//     Fig. 4.5's P = {1..n}. At most 64 replicas (bit masks).
//   - Fig. 4.5's gossip precondition reads gossip_r[r]; it means gossip_r[r']
//     (the prose: "only the operations in the gossip_r[r'] set are gossiped").
//     Its degenerate terms (solid_r[r] ∩ solid_r[r], done_r[r] ∩ done_r[r]) are
//     read as: an operation is queued for gossip to everyone whenever what
//     this replica's gossip says about it changes: it is received (R), done
//     here or relabelled (D, L), stable here (S). Until issue 18 it was queued
//     whenever this replica learned anything new about it, also that another
//     replica had done it or that it was stable everywhere; a message (R, D,
//     L, S) carries neither, so those positions repeated an earlier one, and
//     they were half of a stream's positions under load (newInfo; flagAll,
//     knowledge of knowledge, still rides on the positions queued).
//   - The stable state advances per Fig. 4.5 ("≤ max-stable", up to and
//     including), as soon as operations are stable here (the thesis's variant,
//     not [1]'s).
//   - solidify (one replica) is folded into do_it: with one member, done here
//     is done everywhere. The same holds after removals leave one member.
//   - Values: ESDSAlg recomputes from σ0 (esds-unopt does, every time);
//     ESDSOptAlg keeps the tentative state (stable state plus non-stable
//     operations in label order) and extends it in place when a new label is
//     the largest, rebuilding it from the stable state when a label changes
//     under it.
//
// # impl=simple: SimpleESDSImpl (§2.3, §3.3.4-3.3.7, §3.4.3, §4.2.5)
//
// "Different methods of interprocess communication constitute the only
// difference between ESDSImpl and SimpleESDSImpl ... The desired method of
// communication can be set with a switch in program's configuration file"
// (§4.2.5). The switch is the namespace parameter impl: optimised (the
// default, ESDSImpl's method: asynchronous reliable channels, the channel
// automata "optimized away", §3.3.6; the name follows that section, not
// ESDSOptAlg, which variant=opt selects) or simple. Under impl=simple the
// gossip of either variant travels as SimpleESDSAlg's I/O combination
// gossip_{r,r'}: the output end needs holding-reservation_{r'} (obtained by
// request and grant, Fig. 3.2), sends "Initiate X" with the gossip message
// it would otherwise have sent, and waits in combining_{r'} for "Done X";
// the input end, reserved_r, merges and answers "Done X" and is free again.
// Every gossip interval marks every peer as owed a combination; a replica
// takes them one at a time. Invariant 3.3.1 is checked in simulation
// (invariant.go) and esds-broken-doublereserve breaks it. Decisions where
// the seed is silent or its model differs from ours:
//
//   - Scope: only replica-to-replica gossip is combined. Front-end traffic
//     stays asynchronous: with send=1 (default) a front end reaches its own
//     replica without a message, so gossip is all the inter-process traffic
//     the seed's switch changes here.
//   - Partner choice (open in the seed): round-robin from the last peer
//     asked, skipping peers owed nothing, with nothing to gossip (the
//     action is not enabled), or backing off.
//   - Granting (the seed: "may grant", must for progress): a free replica
//     always grants; any other status rejects.
//   - The holder initiates in a step of its own (a zero-delay timer, the
//     scheduler's next round, §3.4.2), so holding-reservation is a state
//     the invariant checker sees, not a passing moment inside one step.
//   - The "Done X" acknowledgement carries the receiver's stream
//     acknowledgement (variant=opt's stream layer, §6.2), so a receiver
//     never needs a combination of its own just to acknowledge.
//   - Faults (the seed has reliable FIFO channels and no crashes): the
//     requester resends its request and its "Initiate X" every retransmit
//     interval until answered; repeated messages get the same answer (the
//     last request answered and the last "Done X" are kept per peer, keyed
//     by the requester's reservation number). No status expires by clock:
//     a lease would let a grantor go free while a paused holder still
//     holds, breaking 3.3.1. A reservation ends without a combination only
//     when the other process is gone: a message from a new incarnation
//     (a restarted grantor starts free and rejects the old holder's
//     "Initiate X"), or its removal from the membership. The price: while
//     a holder is down, its grantor gossips with nobody (in simulation,
//     strict operations time out under crashes more often than with
//     impl=optimised).
//   - Backoff (§3.4.3 gives no constants): q_{i,j} starts at a quarter of
//     the gossip interval; after a rejection it becomes 2q + a uniform
//     random term in [0, gossip/4] (automaton.Config.Rand), capped at 4
//     gossip intervals (16 made strict operations half as slow again in
//     seed000-simple-vs-optimised), and P_j is not asked again before q_{i,j} has
//     passed (a timer per peer); a grant resets q_{i,j}. The seed does not
//     say whether success resets it; 802.3, which it cites, does.
//   - Livelock is real: replicas that start together tick together, all
//     ask at once, and all reject (a negotiating process cannot grant).
//     The backoff's random term separates them, and under impl=simple a
//     replica's first gossip tick comes at a random phase of the interval
//     (the seed's processes were never in lockstep).
//
// # Beyond the seed
//
//   - Unreliable channels (seed §6.2): incremental gossip runs over one
//     numbered stream per ordered pair of replicas. A message carries a range
//     From..To of the stream (at most "batch" positions) and acknowledges the
//     reverse stream. The receiver applies only a contiguous prefix (a gap or
//     a new stream that does not start at 1 is dropped), acknowledges, and
//     the sender retransmits the unacknowledged window every "retransmit".
//     Full-state gossip (unopt) is idempotent and needs none of this.
//     The retransmission timer restarts whenever the acknowledgement
//     advances: measured from the last send alone, a stream that always
//     had a message in flight (under load, every tick) resent its whole
//     unacknowledged window every tick once the interval had passed, and
//     the receiver merged it again (issue 18).
//   - What a stream position says (the stability rule's premise): the seed's
//     channels are reliable and FIFO, so a replica always knows some past
//     state of each peer's. The stream keeps that: a position holds the
//     operation's flags and label as they were when it was queued, and says
//     exactly that every time it is sent; any later news about the operation
//     is queued at a new position, behind everything learned in between
//     (only the last position, while never sent, is updated in place:
//     nothing follows it). So every prefix the receiver applies is the
//     sender's state at one moment, and when r learns that i has done x, it
//     knows every operation i did before x, with a label at most the one i
//     gave it: no operation can later come to precede a stable one. A
//     message is merged whole before the receiver acts on it, so it carries
//     only the last of an operation's positions in its range. What a merge
//     changed is queued after the whole merge, in label order (queueMerged):
//     queued entry by entry, "x stable here" (learned from the message's S)
//     could precede the lower label of an operation the same message
//     brought, and a peer whose prefix ended between them applied x first
//     (seed 3 of TestMergeQueuesInLabelOrder; Fig. 4.5 queues each
//     operation but says nothing of the order within one receive). Two
//     departures are sound: "gone" is sent for a position whose operation
//     has since been collected (collected means stable at every member, the
//     receiver included, so nothing must precede it), and a new stream
//     starts with the sender's whole state at one moment in label order (a
//     prefix of it holds every operation labelled below its last). Before this rule the stream sent each operation's current
//     state at its first unsent position and skipped positions queued again
//     later: with a batch smaller than what piled up between two sends
//     (batch=4 easily; the default 512 under load) a receiver could learn
//     "x done at i" before operations i did earlier, apply x to its stable
//     state first, and converge to a different order
//     (TestStreamPositionSaysWhatWasQueued).
//   - Descriptors travel once per stream: after the receiver has acknowledged
//     an entry carrying an operation's descriptor, later entries for it (done
//     elsewhere, stable) carry id, flags and label only (flagBare). A restart
//     of the receiver starts a new stream, which carries them again. A
//     replica that gossips about an operation holds its descriptor, so
//     entries to it go bare also once we have merged an entry of its
//     about the operation (issue 28: a replica relaying an operation back
//     to the one it came from sent the whole descriptor, 100-byte value
//     included; BenchmarkPutSteps's peer bytes per SET 479 -> 372). A
//     restart of that replica starts a new stream both ways, as above.
//   - Costs per step follow what changed, not the operations held
//     (index.go): the done, non-applied operations are kept in label order,
//     max-stable_r is maintained as operations become stable, collection
//     looks at the applied operations only, a read landing below the
//     tentative state's last label leaves that state valid (reads do not
//     change it), and the tentative copy of the stable state uses the
//     state's Clone when it has one (KV). values=recompute keeps the
//     snapshot copy, and esds-unopt its recomputation from σ0.
//   - Rebuilds of the tentative state start from a checkpoint (apply.go,
//     issue 18): the seed's val_r(x) is defined over the whole label order
//     and says nothing of how it is computed. A rebuild (each time gossip
//     places a label under the tentative state's last one) replayed every
//     done, non-stable operation: 40% of a node's CPU in a 64-client put
//     run. A rebuild now keeps up to two copies of the tentative state: one
//     at the final frontier and one some 512 operations before its end;
//     a later rebuild starts from the highest copy below every label placed
//     (or value dropped) since: nothing under that label changed, so every
//     value is the one the rebuild from the stable state computes
//     (TestCheckpointsChangeNoValue, TestFrontierCheckpoints compare runs
//     with and without them). The final frontier (finalFrontier) is the
//     minimum over the other members i of the highest label (c, i) heard
//     from i. Below it the label order is final, before it is stable: by
//     §4.2.3's do_it (notes §1.4) i's labels grow, and by the stream rule
//     below whoever sent (c, i) knew every operation i labelled before it
//     with a label at most i's, so gossip can bring only labels above
//     heard[i] or labels that change nothing; this replica's own labels
//     exceed its counter. The seed is silent on this (its values are
//     recomputed from σ0 or the memo); only placement relies on it,
//     ckptFor still drops any copy a placed label lands under, and
//     TestFrontierCheckpoints counts such drops of frontier copies: none
//     (73 when the minimum is replaced by the maximum). A copy costs one
//     clone of the state's key map.
//   - Commuting insertions (apply.go tentInsert, issue 18): when gossip
//     places a label under the tentative state's last one, the service
//     says which operations are key-local (service.Lockable plus KeyLocal:
//     KV's GET, SET, APPEND, INCR, STRLEN), the operation is key-local, and
//     no operation after it in the tentative order names any of its keys
//     or is not key-local, the operation is applied to the tentative state
//     in place: key-local operations on disjoint keys commute, so every
//     value is the one the rebuild in label order computes
//     (TestCommutingInsertsChangeNoValue compares runs with and without,
//     deletes included). Any other placement invalidates the state as
//     before. The seed defines val_r(x) over the label order only. Why a
//     whitelist: KV's per-key versions are not key-local in general (a
//     delete may flush the remembered deletions into a version floor that
//     every absent key's version, hence a SET's or INCR's new version,
//     depends on), so "names disjoint keys" alone is not commuting. Under
//     a heavy load most gossip messages carry at least one operation that
//     conflicts (10,000 keys, hundreds of operations after it), so this
//     helps lighter loads most; BenchmarkOverload (1,000 keys, 100 puts
//     per replica a tick) replays as much as before.
//   - Stale appends (apply.go staleAppend, issue 18): a rebuild starts by
//     copying a checkpoint or the stable state (KV: a clone of the key map,
//     about 1 ms for 10,000 keys, far more than replaying the few hundred
//     operations after it), and at 64 clients every gossip message made
//     one: a quarter of a replica's CPU. When the tentative state is stale
//     only because key-local operations were placed under its last label,
//     the keys they name are noted (notePending); a local key-local
//     operation whose keys are none of those is applied to the stale state
//     at once: on its keys the stale state is the rebuilt one (a key-local
//     operation changes only its keys, and the operations on them are the
//     same, in the same order), so its value is val_r(x) in the current
//     label order. The rebuild waits until a value needs a noted key or
//     any other operation is placed. TestCommutingInsertsChangeNoValue
//     compares answers with and without; synod costs (64 clients, puts,
//     fsync, base and new alternated at load 11-13): CPU per operation
//     0.74x, operations per second 1.30x.
//   - State-free answers (apply.go value, issue 28): an operation whose
//     result the service says is the same in every state
//     (service.StateFree: KV's SET without options answers OK) is answered
//     without rebuilding the tentative state: val_r(x) over any label order
//     is that result. The ESDS thesis defines val_r(x) and leaves when the memo is
//     recomputed open. At 64 clients (puts, fsync) the rebuilds a put's
//     answer triggered replayed 8,000-18,000 operations in one step of the
//     node's loop (85-290 ms steps traced live); with this, none
//     (TestStateFreeAnswersChangeNoValue compares every answer with and
//     without). Reads of a key placed under the tentative state's end still
//     rebuild.
//   - Answers over the operation's keys alone (apply.go keyValue, issue
//     28): when the tentative state is stale, a key-local operation (KV's
//     GET, SET, APPEND, INCR, STRLEN) whose value is needed is computed
//     from the stable state's entries for its keys (KVState.KeysState)
//     plus the done, non-stable writes naming them (byKey, built from the
//     done operations when first needed and dropped at a gossip tick while
//     nothing reads it: index.go keyIndexOn, keyIndexIdle), in label
//     order up to its own label, instead of rebuilding the whole state.
//     That is val_r(x) of the ESDS thesis Fig. 4.2 exactly (a key-local
//     operation depends on and changes its keys only); the seed is silent
//     on how it is computed. It applies only while every non-stable
//     operation that is not a read is key-local (otherwise the rebuild
//     runs as before). Reads also no longer count as touching their keys
//     for commuting insertions: a read changes no state (as labelChanged
//     already assumed), so a write placed under a later read of its key
//     changes no later state, only that read's value, which keeps the
//     value it was answered with, computed in this replica's order at
//     that time, as any value computed before a placement does. At 64
//     clients, half GETs, GETs of keys that gossip had written under a
//     later local write rebuilt the state: BenchmarkGetsAmongPuts
//     (10,000 keys) replayed 10.6 operations per operation, up to 9,169
//     in one rebuild; with this, none beyond 5
//     (TestKeyValuesChangeNoValue compares every answer with and without).
//     Strict operations are unchanged: they are answered from the stable
//     state (stable-value_r(x)) once stable at every member.
//   - Local reads (parameter reads=local, frontend.go localRead, issue
//     28). The seed has no read-only operation: Fig. 4.2 labels every
//     operation (do_it, whose precondition is x.prev ⊆ done_r[r].id) and
//     answers a non-strict one once done here with val_r(x), its value in
//     minlabel_r order over done_r[r]; §4.2.2 defines prev as the
//     operations that "must precede the owner of the descriptor in the
//     order of application to data object state" and strict as "whether
//     the responses to the operation must be consistent with the
//     eventually established serialization"; §1.1 takes from lazy
//     replication [18] that responses "may be out-of-date, not reflecting
//     the effects of operations that have not yet been received by a given
//     replica". A read (service.Service.IsRead) applies to no state, so no
//     operation's value depends on whether or where it stands in the
//     order; the only value its place decides is its own, and a
//     non-strict one need not agree with the eventual order. Its label,
//     its record o/<id>, its gossip, its stability and its collection
//     serve only to give it a place nobody reads. Decision: under
//     reads=local a non-strict read that reaches a replica where every id
//     of its prev set is done (or collected, or itself such a read) is
//     answered in that step with val_r of the read placed after every
//     operation done here (apply.go readValue: what do_it then
//     send_{r,f}("response") would answer, TestReadValueIsValAfterEveryDone),
//     and is neither labelled, persisted, gossiped nor collected. Kept as
//     before: strict reads (their value must be the one in the eventual
//     order, Fig. 4.2's x ∈ ⋂ solid_r[i]), reads whose prev is not all
//     done here (received and ordered, so they wait for prev as do_it
//     does), and every read of esds-unopt or values=recompute. Three
//     consequences, each decided:
//     prev sets naming a read: the replica keeps the ids of the reads it
//     answered so (reads, an id summary in memory), and an operation
//     naming one is done here without waiting for it: its label exceeds
//     every label done here, so it follows the read's prev closure, which
//     is all the constraint means for an operation that changes nothing
//     (the read may stand anywhere after its prev closure). Another
//     replica never hears of such a read: an operation sent there naming
//     it waits as for an id never submitted, until prev_timeout answers
//     an error (outcome unknown); so does one at this replica after a
//     restart (the ids are not persisted). Clients that name reads in
//     prev sets across nodes keep reads=ordered, the default.
//     Why ordered stays the default (decided in session 42, issue 28):
//     the seed answers a non-strict operation by send_{r,f}("response",
//     x, v) with precondition x ∈ pending_r ∩ done_r[r] and v = val_r(x)
//     (Fig. 4.2; Fig. 4.5 the same with stable-value_r for stable x): the
//     answer comes after do_it, which puts x in done_r[r], and done_r[r]
//     is what gossip carries (D), so every replica eventually has x in
//     done and can do an operation whose prev names it (do_it's x.prev ⊆
//     done_r[r].id). The seed relies on that for every id: "operation
//     identifiers are kept around forever because they may enter the prev
//     sets of future operations" (§4.3.1, the Remark after the memoised
//     stable state) and "a prev set may include any operations that have
//     been previously submitted to the system" (§6.1). A local read gives
//     the value do_it then send_{r,f}("response") would give at r, but it
//     is in no done set, at r after a restart or anywhere else, so an
//     operation naming it at another replica is never done by the seed's
//     rules (here: prev_timeout's error). reads=local therefore answers
//     reads as the seed may, but narrows what the seed lets clients put in
//     prev sets; a default may not narrow the seed's interface, so it
//     stays a parameter for clients that do not name reads in prev sets
//     at other nodes. Making it the default needs local reads to enter
//     done sets lazily (their ids and prev sets gossiped, not persisted
//     or ordered), not built.
//     Session order: a client's read at the node whose replica answered
//     its writes (send=1) sees them, as an ordered read does; naming a
//     write in prev makes any replica wait for it (the read is then
//     ordered).
//     Crash and recovery: the answer is a Respond, released under the
//     durability rule (package automaton) after every record written by
//     this step or an earlier one is durable, so a read never reveals an
//     operation whose do_it record a crash could lose; a restarted
//     replica answers from what it recovered, as an ordered read would.
//     The ESDS checker (check.ESDSWith, ESDSOptions.LocalReads, which the
//     simulator sets from AnswersReadsLocally) accepts such reads outside
//     the order, holds an operation naming a read to follow the read's
//     prev closure, and holds a read's value to its prev closure (a
//     single-key read whose writes are blind: the last write it sees may
//     be any write not below a write of its prev closure); the broken
//     variant esds-broken-localread, which answers without its prev, is
//     caught (scenario "reads=local, kv, prev", sim TestESDSSimLocalReads).
//   - Where ESDS's tail latency came from (issue 18; the p99 was 73-200 ms
//     at 64 clients, p50 under 1 ms): not a timer of this protocol. A
//     non-strict operation is answered by the replica it reached in the
//     step that does it (canRespond), with no gossip or batching wait.
//     Traced with a counting build (64 clients, puts, memory mode, loaded
//     2-core machine): the streams fell behind (tens of thousands of
//     positions queued per peer, one batch of 512 sent a tick, while an
//     operation gets several positions per peer: done, done elsewhere,
//     stable here, stable everywhere), so stability lagged seconds, the
//     done, non-stable operations numbered 10,000-23,000, and each rebuild
//     replayed them in the node's one event loop: tens of milliseconds
//     during which nothing else was answered. The final frontier alone
//     did not help there: it lags with the streams (replay 7,000-18,000
//     operations a rebuild against 14,000-23,000 not stable). Sending the
//     whole backlog each tick as up to 32 batch-sized messages was tried
//     before and reverted (the receivers merged every position: CPU per
//     operation 100 -> 170 us).
//   - Gossip backlog: adaptive stream window (streamWindow, parameter
//     widen, off by default; issue 18).
//     Fig. 4.5 sends gossip_r[r'] whole at each send_{r,r'}("gossip"); the
//     batch (§6.2's sequencing needs bounded messages) is a departure, and
//     under a load that queues more than batch positions a tick it let the
//     stream fall behind without bound. Decision: while at most 4 batches
//     are unsent a message carries batch positions, as before (the
//     simulations never reach more: digests unchanged); beyond that one
//     message carries the whole backlog, up to 32 batches, with one entry
//     per operation (the last of its positions in the range: the receiver
//     merges a message whole), which is nearer the seed's whole
//     gossip_r[r'] than the batch was, and changes nothing a prefix says.
//     BenchmarkOverload (3 replicas, 100 puts each per tick, batch 32, 60
//     ticks; go test ./protocol/esds -run '^$' -bench Overload -benchtime
//     1x): without the window the largest rebuild replayed 5,455
//     operations and 7,448 were done but not stable at the end, both
//     doubling from a 30-tick run (2,731, 3,700); with it 1,703 and 4,000
//     (1,603 at 30 ticks), at 15 gossip entries merged per put against
//     0.5 (the rest still queued) and 1.4x the harness's CPU. In the
//     64-client live run the counting build saw the largest rebuild fall
//     from 9,000-12,000 operations to 2,300-2,700 and the non-stable ones
//     from 5,000-10,500 to 900-1,100. The price is the merging the
//     stream had deferred: CPU per operation (synod costs --protocols esds
//     --clients 64 --read-ratio 0 --duration 3s, fsync, runs alternated
//     on a machine at load 11-12) 176-200 us before, 203-233 us after.
//     The p99 could not be told apart at that load (73-300 ms both ways);
//     the 10 ms target of issue 18 is not shown to be met. Then, with
//     binaries alternated (synod compare --protocol esds --durability
//     memory --systems synod --clients 64 --duration 3s --pipeline 0
//     --conns "", load 6-7): with the window 8.8k and 8.2k puts/s (p99 103,
//     98 ms), without it 16.1k and 13.7k (p99 87, 91 ms); gets 14.4k/12.2k
//     (p99 64, 43 ms) against 14.8k/13.2k (p99 104, 110 ms). Halving put
//     throughput for a get tail is not a default: the window is the
//     parameter widen, off by default (the behaviour before issue 18).
//     After issue 18's later changes (fewer positions, stale appends), an
//     instrumented live run (64 clients, puts, memory, 18.7k puts/s) still
//     saw the streams fall behind (2.7 positions per operation and peer
//     against 512 a tick), and widen with a one-batch threshold made the
//     ticks the long steps and cut puts to 6.5k/s: still off. What bounds
//     it and the next step (stability as one label per replica per
//     message, not a position per operation): docs/COSTS.md, "ESDS at 64
//     clients".
//   - Stream cadence (parameter drain, stream.go onDrain; issue 28,
//     session 44). Fig. 4.5's send_{r,r'}("gossip") is an output enabled
//     whenever gossip_r[r'] is non-empty: the seed fixes no cadence, and
//     the gossip tick with at most batch positions a message (§6.2's
//     sequencing) is this implementation's. A stream therefore carries
//     512 positions per 20 ms, and each operation takes about 3 positions
//     per stream (done or relayed, stable here, gone): above about 8.5k
//     puts/s over 3 replicas the streams fall behind without bound, and
//     the merging, stability and collection they defer run for seconds
//     after the load. With drain=D, a stream that still has a full batch
//     unsent after a send, and at most 2 batches unacknowledged, sends
//     its next message D later instead of at the next tick; a replica
//     whose peer's last message was full acknowledges it at its drain too
//     (that opens the peer's window). Messages keep their size; what a
//     message carries, its order and every prefix's meaning are as
//     before, so no checker's or model's expectation changes, and below a
//     full batch nothing is sent differently. BenchmarkPutSteps (3
//     replicas, 25.5k puts/s, thread CPU; docs/COSTS.md, session 44),
//     off against 5ms: positions left queued per stream 26,379 -> 407;
//     CPU per SET including the drain of what the run left 68-73 -> 54-58
//     us, but during the run 30-34 -> 54-57 us (the merging the streams
//     deferred is done during the load: 18.8 entries merged per SET
//     against 6.0, each a record); p99 message step 4.5-5.6 -> 2.5-2.8
//     ms. Session 44 left it off by default, as widen (Gossip backlog,
//     above): a 5-second run at 64 clients, the measure, would
//     pay the deferred work during the run, and live pairs at load
//     15-25 (5-7k puts/s) showed no gain; the fix named was fewer
//     positions per operation. With stability=prefix (below), which is
//     that fix, drain=5ms is the default (session 45): at 25.5k puts/s
//     (BenchmarkPutSteps, two runs each, load 14-19) against drain=off
//     the p99 of a node's step CPU per 5 ms slot, what a put arriving in
//     the slot waits behind, is 5.6-5.8 ms against 9.0-9.6 ms, the CPU
//     per SET including what the run leaves queued 50-52 against 65 us,
//     the operations done and not yet stable here at the end 298 against
//     14,918 per replica (strict operations and collection wait for
//     those); during the run it costs 50-52 against 40-41 us per SET,
//     the merging drain=off defers past the run. At 9k puts/s the
//     streams keep up either way (345 positions queued, 225 operations
//     not yet stable, in both). drain=off restores session 44's default.
//     Since session 46 a stream is due at the drain with min(batch,
//     drainAt=128) positions unsent, not only a full batch: with the
//     prefix and no "gone" (below) the streams carry about one position
//     per SET and no longer fill a batch per tick at 25.5k puts/s, so
//     the drain stopped engaging and each tick's message carried 20 ms of
//     SETs (p99 step CPU per 5 ms slot 7.4-7.9 ms); due at 128, they send
//     about every 5 ms under load (3.4 ms). The seed fixes no cadence
//     (above); below 128 positions per tick nothing changes (the
//     simulations' pinned digests did not move).
//   - Stability as a prefix (parameter stability, stable_prefix.go; issue
//     28, session 45). Fig. 4.5 queues an operation for gossip again when
//     it becomes stable here, so that the peers merge S (solid_r[r'] ∪=
//     S, solid_r[r] ∪= S, done_r[i] ∪= S): a stream position per operation
//     per peer, about a quarter of the streams' positions under load and a
//     third of the entries merged. The seed fixes what a gossip message
//     carries, not how S is spelled. Decision: under stability=prefix (the
//     default) no position is queued for an operation's becoming stable
//     here; every stream message instead carries one label, Stable, the
//     sender's stable prefix: the label of an operation stable here below
//     which every operation done here is stable here (solid_r[r] as it
//     is, never more: Fig. 4.5's "≤ max-stable" applies operations that
//     are not in ⋂ done one by one, so max-stable_r cannot serve, and the
//     invariant "stable implies done everywhere" catches a stamp that
//     claims it). The label a message carries is the one its last
//     position was stamped with when queued, min(prefix, the position's
//     label): every operation the sender knew with a label at most that
//     was queued at or before the position (what a merge changed is queued
//     in label order, a new stream carries the state in label order), so
//     a receiver that has applied the stream up to it knows each of them
//     with its final label, and merges "stable at the sender" for those,
//     as it merges S. Stamped at sending instead, a receiver applied an
//     operation to its stable state ahead of one it had not yet been
//     sent, and "stable orders agree" caught it (TestBrokenStampCaught).
//     A stream with nothing left to send whose prefix grew queues one
//     position for the prefix's operation, so the stamp is acknowledged
//     and retransmitted with the stream; a message reaching the end of the
//     queue carries the prefix as it is at sending (everything known is
//     queued). Positions still carry flagSolid when it was set at
//     queueing. stability=positions restores the positions. Messages are
//     version 2 (the stamp); operation records stay version 1.
//     BenchmarkPutSteps (25.5k puts/s, drain=5ms, two runs each,
//     docs/COSTS.md, session 45): entries merged per SET 18.8 -> 11.8,
//     peer bytes per SET 944 -> 778, CPU per SET 56-61 -> 50-52 us, p99
//     step CPU per 5 ms slot 6.4-6.9 -> 5.6-5.8 ms.
//   - Collection without "gone" (stability=prefix, gc.go goneless,
//     stable_prefix.go solidPrefix; issue 28, session 46). The seed's
//     garbage collection (§4.3.1's remark, §6.1) discards an operation
//     stable at every member and says nothing of telling the peers; until
//     session 46 each peer was sent a "gone" position for it until it
//     acknowledged (Garbage collection, below): with the prefix, half the
//     entries merged under load (5.9 of 11.8 per SET). Decision: under
//     stability=prefix collection queues nothing, and the stable prefix
//     covers the collected operations: when every live operation done
//     here with a label at most stableMax (the label of the last operation
//     applied to the stable state, a stable operation's, persisted in "s"
//     and "g") is stable here, the prefix is at least stableMax, whose
//     operation may be collected (spOp nil; the stamp then rides a stream
//     position that names no operation, id "", and carries no entry).
//     Sound: every operation done here labelled at most stableMax is
//     applied, so live in appliedLive or collected (hence stable here);
//     none unknown here can be labelled below a stable one; and a collected
//     operation is known, with its final label, at every member (each
//     revealed it stable there, which it persisted first), so a receiver
//     can merge the stamp for it as for the others. Live after crashes: a
//     replica that collected x reaches x's label once the live operations
//     below it are stable here, also after a restart that restored none
//     (stableMax comes from "s"/"g"), and each member's prefix does (every
//     operation collected anywhere was revealed stable here by every
//     member, so its record says so, or it is collected there); a new
//     stream to a restarted peer sends the prefix again (spSent reset). A
//     prefix over live operations only (brokenGoneless=1) leaves a replica
//     restarted after its peers collected what it holds unable to learn
//     those are stable there: it keeps them for good
//     (TestBrokenGonelessCaught). impl=simple keeps "gone": its streams
//     send only when they have positions (combination.go gossipEnabled),
//     so a grown prefix alone would not travel; stability=positions too.
//     Records and messages are unchanged in format. BenchmarkPutSteps
//     (25.5k puts/s, drain=5ms, load 22-24, two alternated pairs,
//     docs/COSTS.md, session 46): entries merged per SET 11.8 -> 5.9,
//     peer bytes per SET 778 -> 644, CPU per SET 49-50 -> 40-41 us.
//   - Records at stability (store.go flushDirty, record "p"; issue 28,
//     session 46). The seed has no crashes; this implementation persisted
//     an operation's record again when it became stable here and again when
//     stable everywhere (Crash and restart, below): with its value, two of
//     the three records per operation per replica. Decision, under
//     stability=prefix (not impl=simple): a record is not rewritten for
//     stable everywhere (after a restart the peers' stamps teach it again:
//     their prefixes reach every operation they hold or collected, as
//     above), nor for stable here when the operation's label is at most the
//     stable prefix at the step's end; record "p" then holds that prefix,
//     written after the step's records (durable in order, so "p" durable
//     means every record it covers is), and a restart marks every restored
//     operation labelled at most "p" stable here. An operation stable here
//     above the prefix still gets its record. So what a replica knew stable
//     here, and might have revealed, it knows again after any crash that
//     keeps the step, which the liveness of collection without "gone"
//     rests on (TestBrokenPrefixRecordCaught: without "p" a restart forgets
//     it). Records stay version 1; "p" is new (an older replica ignores
//     it and restores fewer flags). BenchmarkPutSteps (25.5k puts/s):
//     records per SET over three nodes 8.86 -> 3.98.
//   - Crash and restart: a replica persists, before any send or response that
//     reveals it, every operation it has done (descriptor, label, stable-here
//     flag, known-stable-everywhere flag: record "o/<id>"; under
//     stability=prefix the flags below the stable prefix as record "p" and
//     stable everywhere not at all, Records at stability above), the
//     removed members ("m"), and at each garbage collection the stable state ("s": snapshot,
//     last label, counter, id summary, collected ids not yet acknowledged by
//     every peer; for a large state, "g" and the kept records in its
//     place, below). Every start has a new incarnation number; a peer that sees
//     it change starts a new stream carrying its whole state, and ignores late
//     messages from the old incarnation. Operations received but not done are
//     not persisted: their sender (a client retry or a peer's stream) resends
//     them. The values of operations applied to the stable state before a
//     crash are not kept; a retry of one that is still pending then gets an
//     error naming this. Memory durability mode gives none of this: a replica
//     that forgets what it gossiped breaks the guarantee.
//   - Garbage collection (seed §4.3.1, §6.1): an operation applied here and
//     stable at every member is discarded; its id goes to a summary (per
//     client, sorted ranges of sequence numbers for ids of AssignedOpID's form:
//     a watermark plus the gaps; other ids one by one, as the seed keeps them)
//     and its value to a cache of the last 4096. Under stability=positions
//     and impl=simple each peer is told ("gone" entry: stable at every
//     member) until it acknowledges, so that replicas that have not yet
//     heard every stable flag still learn it; under stability=prefix the
//     stable prefix covers collected operations instead (Collection
//     without "gone", above). A position queued while the operation was
//     live and sent after its collection still says "gone".
//   - When to collect (seed §6.1 is silent): every gcEveryTicks ticks, but
//     each collection rewrites the whole stable state (record "s"), so with
//     a large state it waits until the operations it can discard are worth
//     about half the state's snapshot, or nothing new became collectable
//     since the last look, or 50 looks were skipped (gc.go collectDue). At
//     64 clients over 10,000 keys the rewrite every 200 ms was a quarter of
//     a replica's CPU (issue 18). Small states collect as before.
//   - The stable state without its snapshot (record "g", gc.go
//     collectDelta, issue 28): once the snapshot exceeds 64 KiB, a
//     collection writes "g" (what "s" holds but the snapshot and the
//     gone ids: the label of the last operation in the stable state, the
//     counter, the id summary) and keeps the records o/<id> of the
//     operations it discards; "s" is rewritten, deleting "g", when they
//     would take 8 times the snapshot, and their records are deleted
//     from the next tick on, at most gcPerTick a tick (gc.go dropStale;
//     session 50: the 76,000 deletes of one rewrite made its step
//     94-116 ms of CPU, in which the replica answered nothing; a record
//     a crash leaves is one restore skips and queues again). A restart restores "s"'s
//     snapshot and applies the kept operations whose labels lie between
//     "s"'s and "g"'s, in label order (store.go restore), and tells the
//     peers again that the collected ones among them are gone. Every record
//     "g" stands for was written before it (do_it's record, on the step
//     that did the operation here), and runtimes make records durable in
//     order, so a crash that keeps "g" keeps them. The 1.3 MB snapshot
//     (10,000 keys) had been encoded in a collection step every few
//     hundred milliseconds under load (14-36 ms of one step, when nothing
//     else is answered: the next suspect for ESDS's put p99); now once
//     per 80,000 or so collected operations. Collections are then due
//     every gcEveryTicks again (collectDue): a "g" costs what it discards.
//     The rewrite of "s" on that path is paced (rewrite.go, issue 28,
//     session 51): its snapshot's encoding, 8-15 ms of one step in
//     process at 10,000 keys (~7 ms live), was the longest ESDS step at
//     64 clients. For a KV state the collection that would rewrite "s"
//     takes a copy of the stable state (its key map; values shared) and
//     writes "g" instead; each later tick encodes about 64 KiB of the
//     copy's snapshot; the tick that encodes the last part writes "s"
//     (the copy's snapshot with the fields as they were at the copy:
//     stableMax, counter, id summary) and then "g" (the fields now) in
//     one step, and only then queues the deletes of the kept records with
//     labels at most the copy's; the ones collected since stay kept. A
//     crash before that step finds the old "s", "g" and kept records; one
//     after it finds the new "s", "g" and the records above "s"'s label:
//     restore is unchanged, and so is every record's format
//     (TestPacedRewriteLosesNoRecord restores each replica from its disk
//     after every step, mid-rewrite included, and compares the stable
//     state with the replay of its restored order; it fails when the end
//     of a rewrite drops the records collected after the copy). A
//     replica restarted with a large "s" stays on that path from its
//     first tick (restore sets the snapshot's size): before, its first
//     collection examined every applied operation and rewrote "s" whole
//     in one step (TestRestartKeepsPacedRewrite).
//   - Incremental collection (gc.go collectEveryTick, issue 28): once
//     "g" is in use, collection runs at every tick instead of every
//     gcEveryTicks, and each tick examines at most gcScanPerTick (8,192)
//     applied operations, from where the previous tick stopped, and
//     discards at most gcPerTick (2,048): every gcEveryTicks-th tick
//     discarded ten ticks' worth at once (the longest ticks at 64
//     clients). The seed (§6.1) says nothing of when or how much to
//     collect; what is collected, and every record, is as before, and
//     small states (every simulation) keep the old schedule.
//   - Membership: a dead replica blocks stability, hence strict operations. The
//     parameter removed=n3,n4 or the admin request Op{Kind: "esds.remove",
//     Key: "n3"} (to any node; the RESP gateway validates operations against the
//     service and does not pass it through yet) removes it; the
//     removed set is gossiped and merged by union, and persisted. Stability is
//     then computed over the remaining members. A removed replica is ignored
//     for good: operations only it had done are lost, and it must not rejoin
//     with its old state (re-adding a replica is not implemented).
//
// # Durability memory (decision, issue 29)
//
// The ESDS thesis assumes replicas never fail (§4.3.1, "Incremental Gossip": "if we
// assume that replicas do not fail"; crash recovery is not addressed), and
// answers a non-strict operation as soon as one replica has done it (Fig.
// 4.2, send_{r,f}). With durability memory a restarted replica has no
// records: it forgets every operation it did, so those it acknowledged and
// had not yet gossiped are lost for good, and until its peers' streams
// refill it, it serves from a state that lacks writes they hold (seen live:
// DBSIZE 1 against 2, and a strict GET answered from that hole). A rejoin
// by state transfer before serving would close the hole but cannot bring
// back what only the crashed replica held, so memory mode cannot be made
// safe. Decision: a cluster file that runs esds on more than one node with
// durability memory is refused at start with this reason (CheckDeployment,
// deploy.go), unless the namespace sets volatile=true, for runs without
// restarts such as the seed's own experiments (experiment/seed000 sets it
// when it runs in memory). One node in memory mode is allowed: it forgets
// everything at a restart, like any protocol in memory mode, and there is
// no peer to disagree with.
//
// # For runtimes and tests
//
// *ESDS has two methods outside the automaton contract: RecordOrder (before
// Start: keep the ids applied to the stable state, across collection and
// restarts) and FinalOrder (this replica's total order of the operations it
// has done). The simulator uses them after quiescence to check convergence
// (package check, ESDS).
//
// # Broken variants
//
// Registered apart (automaton.RegisterBroken), for the workbench only:
// "esds-broken-earlystrict" answers strict operations once done locally (the
// ESDS checker catches it); "esds-broken-maxlabel" merges labels by maximum
// (the invariant "labels only decrease" catches it at the first merge that
// raises a label, the checker later); "esds-broken-duplabel" labels
// operations (counter, 0) whatever the replica (the invariant "labels
// unique" catches it at the second replica's first do_it); "esds-broken-doublereserve"
// runs impl=simple and grants a reservation while reserved for another
// replica (the invariant "reservation 3.3.1" catches the first requester
// holding what its grantor dropped). "esds-broken-localread" runs
// reads=local and answers a non-strict read also when its prev ids are not
// done here (the ESDS checker catches an operation naming such a read
// ordered before the read's prev, or a read whose value no set holding its
// prev closure gives).
//
// # Invariants
//
// invariant.go states what must hold after every step, from the seed's
// claims (§4.2.3, Figs. 4.2 and 4.5, §4.3.1): labels unique, labels only
// decrease, done and solid sets only grow, knowledge is true, stable implies
// done everywhere, stable orders agree; with impl=simple, reservation
// 3.3.1. Across a crash the stable orders are held to what the crash did
// not lose: a replica may apply an operation to its stable order while the
// record of its own do_it is unsynced, and a crash that loses that record
// loses nothing anyone saw, so the checker (an automaton.CrashObserver) forgets
// the crashed incarnation's order from the first operation whose record was
// lost (invariant.go says why that is exactly what a correct replica may
// lose).
//
// # Parameters
//
//	gossip        positive duration or off  20ms       gossip interval; off: replicas learn only through front ends (experiments.go)
//	retransmit    positive duration         100ms      stream resend interval, rounded up to gossip intervals
//	batch         positive integer          512        operations per stream message
//	drain         positive duration or off  5ms        off: a stream sends at gossip ticks only; a duration (5ms, the default since session 45): a stream with min(batch, 128) positions unsent sends its next message this soon instead of at the next tick, while at most 2 batches are unacknowledged (stream.go onDrain; package doc, Stream cadence)
//	stability     one of prefix, positions  prefix     how a replica tells its peers what is stable here: prefix, one label per stream message (every operation up to it is stable here; stable_prefix.go), or positions, a stream position per operation that becomes stable here (before session 45)
//	widen         true or false             false      under a backlog of more than 4 batches, one stream message carries the whole backlog up to 32 batches (stream.go streamWindow): bounds rebuilds, costs put throughput (package doc, Gossip backlog)
//	variant       one of opt, unopt         opt        ESDSOptAlg (Fig. 4.5) or ESDSAlg (Figs. 4.1, 4.2)
//	values        one of memo, recompute    memo       memoise the stable state, or recompute values from the initial state
//	removed       comma-separated list      ""         replicas removed from the membership (node ids)
//	send          one of 1, 2, all          1          front end: replicas each operation is sent to, from its own around the ring (frontend.go)
//	resend        positive duration or off  off        front end: resend a waiting operation to the next replica this often, rounded up to gossip intervals
//	maxsends      positive integer          2          front end: cap on sends of one operation to one replica
//	replicas      comma-separated list      ""         nodes holding a replica (node ids; empty: every node); the others run front ends only (frontend_only.go)
//	prev_timeout  positive duration         10s        front end: an operation whose prev set is not all done here after this long is answered an error (frontend.go expirePrevWaits)
//	volatile      true or false             false      accept durability memory with more than one replica (refused otherwise: package doc, Durability memory); for runs without restarts, as the ESDS thesis's
//	reads         one of ordered, local     ordered    non-strict reads: labelled, persisted and gossiped like every operation (Fig. 4.2), or answered from the replica's view when their prev ids are done there, without a label, record or gossip (frontend.go localRead; package doc, Local reads)
//	impl          one of optimised, simple  optimised  gossip over asynchronous channels (ESDSImpl, §3.3.6) or I/O combinations with reservations (SimpleESDSImpl, §3.3.4-5; reserve.go)
//
// Unknown parameters are errors. esds-unopt's variant defaults to unopt.
// The table is generated from the parser's (protocol/proto.Spec.Doc) and
// TestParamDoc keeps it so.
//
// # Node symmetry (model checking)
//
// Not declared. A replica labels operations (counter + 1, replica), and
// labels order operations by counter then replica position (the stable
// order every replica converges to), so renaming replicas reorders
// concurrent operations: a renamed state does not have the renamed
// future.
package esds
