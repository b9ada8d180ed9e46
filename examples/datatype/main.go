// Command inventory is synod plus one data type, Inventory: every synod
// subcommand works, and --service inventory names the type.
//
//	go build -o inventory . && ./inventory cluster up --service inventory --protocol paxos
package main

import "github.com/synod-dev/synod/synod"

func main() {
	synod.MustRegisterService(Inventory{})
	synod.Main()
}
