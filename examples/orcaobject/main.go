// Command orcaobject is synod plus an Orca object type (Bucket, a bounded
// buffer with guarded put and get) and a parallel program over it (Primes):
//
//	go build -o orcaobject . && ./orcaobject orca run primes --nodes 3
//	./orcaobject orca run primes --live --nodes 3     # clusters of 1, 2, 3 node processes
//	./orcaobject cluster up --service orca --protocol orca-bcast   # and: redis-cli synod op new b bucket 4
package main

import "github.com/synod-dev/synod/synod"

func main() {
	synod.MustRegisterObjectType(Bucket)
	synod.MustRegisterProgram(Primes)
	synod.Main()
}
