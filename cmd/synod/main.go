// Command synod runs Synod nodes and local clusters, talks to them, benchmarks,
// simulates and checks histories. It is synod.Main (package
// github.com/synod-dev/synod/synod) with nothing added: the subcommands live
// in internal/cli, and a user's own binary that registers services and object
// types before calling synod.Main is a full synod too (docs/EXTENDING.md).
package main

import "github.com/synod-dev/synod/synod"

func main() { synod.Main() }
