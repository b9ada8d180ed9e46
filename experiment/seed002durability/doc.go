// Package seed002durability reproduces the experiments of the Grid Services thesis,
// chapter IV (durability as a per-object attribute, issue 11):
//
//   - seed002-durability-counter: the Counter service (IV.D.1), add
//     latency with one client (the seed: original 139 ms, PB "essentially
//     the same", DB 171 ms, +23%) and throughput for 1, 2, 4, 8, 12, 16
//     clients (Fig. IV.3), for the original service, PB (replication
//     proxy) and DB (database proxy) on SQLite and PostgreSQL with state
//     fsync on and off. Default 2,000 adds per cell; --full runs the
//     seed's 40,000; --quick 100 with 1 and 4 clients.
//   - seed002-durability-matchmaker: the Matchmaker (IV.D.2), jobSubmit
//     latency against the computation interval for original, PB, PB+DB
//     and DB (Fig. IV.6), PB+DB and DB on each of --databases.
//
// # What runs where (--bed)
//
//   - live (the default, live.go): a real pbdurable cluster per cell, of
//     `synod node` processes on loopback started through experiment.Env
//     and stopped by PID: three nodes under the mapping (Counter: service
//     counter, mappings pb and db; Matchmaker: service gridmatchmaker,
//     mappings pb, pbdb, db). The original service is the same service on
//     ONE pbdurable node with every object kept nowhere (the Counter's
//     mapping reconstructible, the Matchmaker's original: its
//     reconstructible keeps the accounts in the database): the same
//     service code and runtime path without backups or database, as the
//     seed's original was the service without proxies. The database is shared by every node (protocol/pbdurable's
//     durability_dsn): one SQLite file in the run's scratch directory, or
//     a fresh database on one private PostgreSQL 15 server per run
//     (durability/pgserver, stopped by PID after the run's last
//     PostgreSQL cell or on interrupt). The nodes' own records are in
//     memory (pbdurable keeps only pbd/booted there); rate_checking is 1s
//     (no failures are injected, and a loaded machine otherwise makes a
//     false fail-over mid-cell). Each row prints the machine's load
//     average: the machine is shared, and figures under load are noise. Clients are package
//     client connections sent to the primary (PreferLeader); a Counter
//     cell checks that the counter ends at exactly the adds answered, a
//     Matchmaker cell that the machines left are those advertised minus
//     the jobs placed.
//   - process (bed.go): the earlier in-process bed, kept as a labelled
//     column: clients, a service that runs each request as one atomic
//     action through the generated proxies, a backup service that
//     acknowledges each shipped buffer and then applies it, and the
//     database, on loopback TCP in one process. It measures the
//     mechanisms' costs without the Synod runtime.
//
// Every row states its database's state fsync ("- (no database)" for the
// original and PB) and what it ran on. The summary gives "holds" or
// "does not hold" per seed claim, per bed and database; the tolerances
// are in counter.go (tolSame, tolDB, tolFlat).
//
// # Departures from the seed
//
//   - The seed's computation intervals are seconds; ours are scaled to
//     milliseconds so that a run takes minutes.
//   - The seed's database was MySQL 4.0 InnoDB on the backup's machine;
//     ours is SQLite (a file on the one machine) or PostgreSQL 15 on
//     loopback, each with state fsync on and off (the Matchmaker: --fsync,
//     default on).
//   - The seed ran three machines on 1 Gbit Ethernet with a 2006 SOAP
//     stack (139 ms per add); ours is one 2-core machine on loopback, so
//     ratios compare, milliseconds do not.
//   - CI runs --quick of both experiments live on SQLite (live_test.go);
//     `go test -short` skips them.
package seed002durability

import "github.com/synod-dev/synod/experiment"

func init() {
	experiment.Register(&Counter{})
	experiment.Register(&Matchmaker{})
}
