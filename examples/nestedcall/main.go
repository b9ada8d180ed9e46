// Command nestedcall is synod plus a nested-call program (Orders) for adam
// namespaces:
//
//	go build -o nestedcall . && ./nestedcall cluster up --protocol adam --param program=orders
//	redis-cli -p PORT set order:1 apples            # OK, once the callee answered
//	redis-cli -p PORT get receipt:order:1           # "apples #1"
//	redis-cli -p PORT -n 0 ... or synod kv --namespace remote get sold:apples
//	./nestedcall sim --protocol adam --param program=orders --callee-protocol paxos --faults all
package main

import "github.com/synod-dev/synod/synod"

func main() {
	synod.MustRegisterNestedProgram(Orders{})
	synod.Main()
}
