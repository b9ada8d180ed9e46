#!/bin/sh
# The Stateright comparison (issue 20, item 4): builds Stateright's own
# examples (linearizable-register = ABD with 2 clients, paxos with 2
# clients) with cargo in a temporary directory, runs them, then runs Synod's
# model checker on the equivalent models in the same run, and prints both
# state counts and states/s. Not in CI. Usage: mc/stateright/run.sh [version]
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
echo "== Stateright $VER (BFS, all cores)"
for ex in "linearizable-register check 2" "paxos check 2"; do
  set -- $ex
  echo "-- $*"
  /usr/bin/time -f "   wall %e s" ./target/release/examples/$1 $2 $3 2>&1 | grep -Ei "states|sec|wall|done|discover" | tail -6
done
echo "== Synod mc (BFS, all cores, same client counts)"
cd "$REPO"
go run ./mc/stateright 200000
echo "ratio = Synod states/s / Stateright states/s, from the lines above"
