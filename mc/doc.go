// Package mc is Synod's explicit-state model checker (issue 20): it
// explores every interleaving of a small configuration of any registered
// protocol, in the manner of Stateright's checker and DSLabs' search tests,
// running the protocol's own automata (package automaton) unchanged.
package mc
