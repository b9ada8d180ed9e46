#!/bin/sh
# The Stateright comparison (issue 32 item 6): builds Stateright's own
# examples (paxos, linearizable-register) with cargo in a temporary
# directory, then runs mc/stateright, which checks them with Stateright's
# binaries and, in the same run, the same models written as Synod
# protocols with Synod's model checker, and prints one table (unique
# states, seconds, states/s per wall and CPU second, property results,
# load average). Not in CI. Usage: mc/stateright/run.sh [flags of
# mc/stateright: -seconds N, -only paxos|register|own, ...]
# (SR_VERSION picks Stateright's version, 0.31.0 by default;
# CARGO_TARGET_DIR keeps the Rust build between runs.)
set -eu
VER=${SR_VERSION:-0.31.0}
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
BIN=$(cd "${CARGO_TARGET_DIR:-target}"/release/examples && pwd)
cd "$REPO"
echo "== Stateright $VER examples built in $BIN; machine: $(nproc) cores"
go run ./mc/stateright -sr "$BIN" "$@"
