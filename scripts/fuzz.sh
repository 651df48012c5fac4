#!/usr/bin/env bash
# Runs each libFuzzer target (or the one named) for SECONDS, seeded from
# tests/fuzz/corpus and the TensorFlow test graphs. Findings land in
# build-fuzz/findings/.
# Usage: scripts/fuzz.sh FUZZ_BIN_DIR SECONDS [TARGET]
set -euo pipefail
dir=$1; seconds=$2; only=${3:-}
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
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$dir/../findings/$name-" "$work" "${seeds[@]}"
done
