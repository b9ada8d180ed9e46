package esds

// Parameters for the ESDS thesis's experiments (chapter 5; package
// experiment/seed000):
//
//   - gossip=off: replicas send no gossip at all ("the gossip messages have
//     been disabled. Without gossip, replicas only know about the operations
//     that were sent to them directly by the front end", §5.5.2, Figs. 5.7,
//     5.10). Non-strict operations are answered as usual, from the replica's
//     own operations; with more than one replica nothing becomes stable, so
//     strict operations are never answered, replicas never converge and
//     garbage collection never discards anything. For measurements only:
//     such a namespace is not eventually serializable.
//   - values=recompute: every response value is computed as the thesis's
//     ESDSOptImpl does (§4.3.1): from the memoised stable state, re-applying
//     every done operation that is not yet stable. The default, values=memo,
//     also keeps the tentative state and extends it in place while new labels
//     are the largest, so a non-strict response costs one Apply; recompute
//     makes its cost grow with the number of non-stable operations, the
//     factor the seed names for the replicas' response time (§5.5.2). Both give
//     the same values.
