#!/usr/bin/env bash
# Runs each libFuzzer target (or the one named) for SECONDS, seeded from
# tests/fuzz/corpus and the TensorFlow test graphs. Findings land in
# build-fuzz/findings/, and any makes the script fail.
# FUZZ_SEED=N fixes libFuzzer's random seed, so that a run from an empty
# working corpus tries the same inputs each time (CI does, so a finding is
# reproducible and not a matter of luck); without it each run differs.
# Usage: scripts/fuzz.sh FUZZ_BIN_DIR SECONDS [TARGET]
set -euo pipefail
dir=$1; seconds=$2; only=${3:-}
seed=()
[[ -n "${FUZZ_SEED:-}" ]] && seed=(-seed="$FUZZ_SEED")
top=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir/../findings"
for bin in "$dir"/fuzz_*; do
  name=$(basename "$bin")
  [[ -n "$only" && "$name" != "$only" ]] && continue
  work="$dir/../corpus-$name"
  mkdir -p "$work"
  echo "== $name for ${seconds}s"
  seeds=("$top/tests/fuzz/corpus")
  [[ -d "$top/tests/data/tensorflow" ]] && seeds+=("$top/tests/data/tensorflow")
  "$bin" "${seed[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$dir/../findings/$name-" "$work" "${seeds[@]}"
done
