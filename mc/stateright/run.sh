#!/bin/sh
# The Stateright comparison (issue 20, item 4): builds Stateright's own
# examples (linearizable-register = ABD with 2 clients, paxos with 2
# clients) with cargo in a temporary directory, runs them, then runs Synod's
# model checker on the equivalent models in the same run, and prints both
# state counts and states/s. Not in CI. Usage: mc/stateright/run.sh [version]
# (CARGO_TARGET_DIR keeps the Rust build between runs; SR_SECONDS bounds
# linearizable-register, SYNOD_STATES Synod's searches.)
set -eu
VER=${1:-0.31.0}
REPO=${SYNOD_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
cargo new -q srcmp && cd srcmp
# the examples' own dev-dependencies (stateright's Cargo.toml)
printf 'stateright = "=%s"\nenv_logger = "0.11"\nlazy_static = "1.5"\nnum_cpus = "1.17"\npico-args = "0.5"\nserde_json = "1"\nserde = { version = "1", features = ["derive"] }\n' "$VER" >> Cargo.toml
cargo fetch -q
SRC=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/stateright-"$VER" | head -1)
mkdir -p examples && cp "$SRC"/examples/linearizable-register.rs "$SRC"/examples/paxos.rs examples/
cargo build -q --release --examples
BIN=${CARGO_TARGET_DIR:-target}/release/examples
# linearizable-register's exhaustive search takes minutes (41 M states):
# it is stopped after SR_SECONDS and its rate read from its last progress
# line (Stateright prints states, unique states and seconds every few
# seconds); paxos runs to the end.
echo "== Stateright $VER (linearizable-register: DFS, paxos: BFS; all cores)"
echo "-- linearizable-register check 2 (stopped after ${SR_SECONDS:=120} s)"
timeout "$SR_SECONDS" "$BIN"/linearizable-register check 2 2>&1 | grep -Ei "states|sec|done|discover" | tail -3 || true
echo "-- paxos check 2"
/usr/bin/time -f "   wall %e s" "$BIN"/paxos check 2 2>&1 | grep -Ei "states|sec|wall|done|discover" | tail -6
echo "== Synod mc (same client counts)"
cd "$REPO"
go run ./mc/stateright "${SYNOD_STATES:-200000}"
echo "ratio = Synod states/s / Stateright states/s, from the lines above"
