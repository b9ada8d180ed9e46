// Package compat is Synod's compatibility suite with Redis (issue 17 item 5):
// it starts a real 3-node Synod cluster and a real redis-server, drives both
// with two real client libraries, go-redis v9 (RESP3) and redis-py (RESP2,
// through the driver in compat/py/driver.py), and compares every answer.
//
// # What runs
//
// TestMain builds the synod binary, starts one 3-node cluster (memory
// durability) serving one namespace per registered protocol that can run the
// KV service, twice: "go-<protocol>" for the go-redis pass and
// "py-<protocol>" for the redis-py pass, so that both passes start from the
// same empty state. It starts redis-server on a free 127.0.0.1 port in a
// temporary directory (no persistence, 64 databases) and stops it and the
// cluster by PID. Namespace number i of a pass is Redis database i of that
// pass (go: 0..N-1, py: 32..32+N-1), so each Synod namespace has a Redis
// twin holding the same keys.
//
//   - TestCases runs every file in testdata/ (package datadriven, one file per
//     command family). Each command of a case goes to redis-server and to
//     every selected Synod namespace, once per client library; the go-redis
//     answer from redis-server is the expected output written in the file
//     (rewrite with -rewrite), and every other answer must equal its twin.
//   - TestUnsupported sends every command redis-server lists in COMMAND LIST
//     and Synod does not to Synod, which must answer Redis's unknown-command
//     error word for word; and every command Synod lists must appear in some
//     case file (the suite covers everything Synod supports).
//   - TestCommandsDoc regenerates docs/COMMANDS.md (supported commands per
//     protocol) from the gateway's command table (COMMAND INFO of a live node),
//     the case outcomes per namespace and the registry's capabilities, and
//     fails when the checked-in file differs (SYNOD_COMPAT_REWRITE=1 writes it).
//
// The suite prints its counts: commands sent, answers compared with
// redis-server, mismatches. Without redis-server or python3 with redis-py it
// skips, unless SYNOD_REQUIRE_COMPAT=1 (scripts/test sets it when it could
// install them), when it fails.
//
// # Case format
//
// A case file holds datadriven cases. The directive is run, with optional
// arguments:
//
//	run [ns=<protocol>,...|all] [skip=<protocol>,...] [refused=<protocol>,...] [differs=<protocol>,...]
//	<command line>
//	...
//	----
//	<command line>
//	<answer>
//	...
//
// A list may name groups defined by the registry's capabilities instead of
// protocols: "all", "register" (register protocols: get, set, del and exists
// only) and "nonatomic" (no atomic groups, so no MULTI/EXEC); a protocol added
// later then falls into place. ns selects the protocols whose namespaces run the
// case (default all), skip
// removes some (say why in a comment). refused lists protocols on which Synod
// deliberately refuses some of the case's commands (INCR or SET NX on a
// register protocol, MULTI where no atomic group exists): there a command
// Synod answers with an error is not sent to the Redis twin (so both keep the
// same state) and docs/COMMANDS.md records it as refused for that protocol;
// the other commands are compared as usual, and at least one must be refused.
// differs lists protocols whose answers legitimately differ from Redis's (a
// register protocol's DEL count; say why in a comment): the commands go to
// both servers but their answers are not compared, and docs/COMMANDS.md says
// "differs". The expected output comes from the first namespace that neither
// refuses nor differs.
//
// A command line is words separated by spaces; a word may be a Go
// double-quoted string ("hello world", "\x00"). A line may start with one
// marker saying how its answers are compared:
//
//	~shape    only the kind of the answer is compared (INFO, CLIENT ID, ...)
//	~sorted   the elements of an array answer are compared as a set (KEYS, SMEMBERS)
//	~error    both answer an error; the texts may differ (the expected output shows only the code)
//	~synod    sent to Synod only; its answer is printed, not compared (SYNOD commands)
//
// Answers are rendered on one line, client-neutral: "text" for simple and bulk
// strings, (integer) n, (double) x, (boolean) b, (nil), (error) message,
// [a, b] for arrays and sets, {k: v} for maps (keys sorted).
//
// Conventions for authors: a file's keys start with the file's name
// ("strings:k1"), so files do not see each other's keys; commands that see the
// whole key space (KEYS, SCAN, DBSIZE, FLUSHDB) belong in a case that sets up
// and clears its own state, or use ~sorted/~shape. Comments start with #.
package compat
