// Package durability is the Grid Services thesis, chapter IV ("Durability – a Service
// Attribute"): a service's state lives in named state objects, and each
// object's durability is chosen after the service is written, by a
// mapping, without changing the service's code. Three mechanisms (IV.B.2):
//
//   - replicated: backup copies of the object at backup replicas; the
//     primary ships the request's update buffer at commitA and answers
//     after the backups acknowledged (primary-backup's state updates);
//   - database: every update becomes the mapping's SQL statements, run in
//     one database transaction per request (startA/commitA as
//     BEGIN/COMMIT); a new primary reloads the object by the mapping's
//     queries;
//   - reconstructible: nothing is kept; init = recover = the empty object,
//     or the empty object and then a rebuild method.
//
// # The pieces
//
//   - The proxies (proxy.go): the seed's interface (Fig. IV.2, IV.C.2):
//     Invoke, Init, Recover and the action-control methods StartA,
//     CommitA, StartTA, CommitTA, AbortTA, plus Apply (the backup side of
//     commitA) and Restore (recovery rows). One generic implementation
//     serves the three mechanisms; the mapping entry picks the behaviour.
//     Set drives every proxy of a service, so that a request is all or
//     nothing across its objects (IV.B.3): one SQL transaction holding
//     every database object's statements, one shipped buffer holding
//     every replicated object's updates.
//   - The mapping language (mapping.go, YAML): per object its mechanism,
//     init statements, recovery queries (each row replayed as an update
//     method: Fig. IV.5's "for (each line) insertBill(clientID,
//     balance)"), a rebuild method, per update method its instruction
//     (`repeat` on the backup, `snapshot` of the whole object, `none`, or
//     `{sql: ...}` templates whose :name placeholders are the method's
//     argument names), checkpoint (none, copy) and restore (checkpoint,
//     recover, init). Validate names the field of every error
//     (objects.AccountSet.methods.SetBill: ...).
//   - The compiler (package gen, `synod-lab durability gen`, `go generate`):
//     reads the Go state-object types and the service type, checks the
//     mapping, emits typed proxies and the service's rewiring as plain Go
//     (durable_gen.go), committed and kept in step by a test.
//   - The database (package sqlstore): SQLite embedded (modernc.org/sqlite,
//     pure Go) by default, PostgreSQL through pgx's database/sql driver;
//     package pgserver starts a private PostgreSQL for tests and
//     experiments.
//   - The example services (examples/counter, examples/matchmaker): the
//     seed's Counter (original, PB, DB) and Matchmaker with MachineQueue
//     and AccountSet (original, PB, PB+DB, DB).
//
// # Decisions where the seed is silent, ambiguous or does not fit
//
//   - Update methods (IV.B.1 "all state access operations by the service
//     are method calls"). The seed's Java proxies intercepted every call by
//     reflection and the mapping said which were updates. In Go the
//     generator decides from the signature: an exported method that
//     returns nothing is an update (SetValue, insertBill, setBill); one
//     that returns something is a read and must not change the object.
//     Update methods take named parameters of the kinds int, float,
//     string, []byte and bool, which the buffer, the SQL statements and
//     the wire carry as int64, float64, string, []byte, bool.
//   - The rewiring (IV.C.4 "all method calls to the state objects are
//     replaced with calls to the corresponding durability proxy"). Go
//     cannot replace calls on a concrete type without rewriting the
//     service's source, so the service holds each object in a field of the
//     generated interface <Object>API, which the bare object (the original
//     service, NewOriginal<Service>) and its proxy (NewDurable<Service>)
//     both implement. The service's code does not change when the mapping
//     does; only the constructor differs. Durable<Service> brackets each
//     service method with StartA and CommitA on every proxy (the seed:
//     "for all state objects that may be updated"; a proxy with an empty
//     buffer produces no work, so calling it on all is the same) and
//     returns the Work beside the method's results.
//   - Mechanism chosen at deployment. The seed's compiler pasted the
//     mapping's instructions into each proxy. Ours emits proxies that take
//     the mapping at run time (validated against the generated
//     <Object>Info), so one build runs all four Matchmaker configurations;
//     the generator still checks the mapping it is given.
//   - Pure proxies. Synod's protocols are pure automata, so a proxy never
//     does I/O: Init, Recover, CommitA, CommitTA and AbortTA return Work
//     (statements to run in one transaction, recovery queries, the buffer
//     to ship) and the runtime carries it out (an Effect of kind
//     "durability.sql" for the database; peer messages for the backups).
//   - Recovery of database objects replays rows through an update method
//     on the empty object, as Fig. IV.5 does; the Matchmaker's DB queue
//     keeps the advertisement order in a seq column so that "the first
//     suitable machine" is the same after recovery.
//   - Init statements run at every start of a primary, so they must be
//     idempotent (CREATE TABLE IF NOT EXISTS, INSERT ... ON CONFLICT DO
//     NOTHING); the seed's backup "does not call the init methods of the
//     database proxies", which is the same thing when init is idempotent
//     and spares the backup from knowing whether a first primary ran.
//   - Transactions (IV.C.2). startTA checkpoints the object (mapping:
//     replicated copy, database none, reconstructible none) and opens a
//     buffer; startA/commitA are ignored inside it; commitTA returns the
//     whole buffer; abortTA restores (replicated: the checkpoint;
//     database: recover, i.e. reload after the database transaction was
//     never committed; reconstructible: init, the seed's "abort to an
//     empty state"). The seed's replication startTA also registers the
//     backups as participants; here the transaction runs at the primary
//     and its buffer reaches the backups only at commitTA, so a failure of
//     the primary aborts it (the seed's second option: the client
//     reissues).
//   - Nondeterministic update methods cannot be repeated (IV.B.3); the
//     `snapshot` instruction ships the object's state after the request
//     (the generated JSON encoding of its exported fields) instead.
//   - All or nothing per request w.r.t. failures (IV.B.3): a crash before
//     commitA loses the buffer and the open SQL transaction, so neither
//     backups nor the database see part of a request. A service method
//     that fails half-way through (not a crash) is not rolled back: the
//     example services check before they update.
//   - Checkpoints use the objects' exported fields (encoding/json): state
//     objects keep their state in exported fields.
//
// # State fsync
//
// sqlstore.Config.Sync chooses whether a commit is durable before it
// returns (SQLite synchronous=FULL or OFF, PostgreSQL synchronous_commit
// on or off); every figure prints it.
package durability
