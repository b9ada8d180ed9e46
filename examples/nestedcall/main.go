// Command nestedcall is synod plus two nested-call programs for adam
// namespaces: Orders over the KV, and Demand over a user's data type
// (examples/datatype's Inventory, registered here too):
//
//	go build -o nestedcall . && ./nestedcall cluster up --protocol adam --param program=orders
//	redis-cli -p PORT set order:1 apples            # OK, once the callee answered
//	redis-cli -p PORT get receipt:order:1           # "apples #1"
//	redis-cli -p PORT -n 0 ... or synod kv --namespace remote get sold:apples
//	./nestedcall sim --protocol adam --param program=orders --callee-protocol paxos --faults all
//
//	./nestedcall cluster up --protocol adam --service inventory --param program=demand
//	redis-cli -p PORT synod op stock apples 5        # 5 (the shop's own)
//	redis-cli -p PORT synod op take apples 2         # 3, once the warehouse counted the demand
//	./nestedcall sim --protocol adam --service inventory --param program=demand \
//	    --callee-protocol paxos --callee-service inventory --faults all --callee-faults all
package main

import "github.com/synod-dev/synod/synod"

func main() {
	synod.MustRegisterNestedProgram(Orders{})
	synod.MustRegisterService(Inventory{})
	synod.MustRegisterNestedProgram(Demand{})
	synod.Main()
}
