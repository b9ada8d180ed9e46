// Command inventory is synod plus one data type, Inventory: every synod
// subcommand works, and --service inventory names the type.
//
//	go build -o inventory . && ./inventory cluster up --service inventory --protocol paxos
//
// The type is its own package (inventory/), so that another module can
// use it too: examples/nestedcall runs a nested-call program over it.
package main

import (
	"example.com/inventory/inventory"
	"github.com/synod-dev/synod/synod"
)

func main() {
	synod.MustRegisterService(inventory.Inventory{})
	synod.Main()
}
