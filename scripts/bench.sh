#!/usr/bin/env bash
# Runs every benchmark in BENCH_DIR (or those named) and prints their figures.
# Usage: scripts/bench.sh BENCH_DIR [NAME...]
set -euo pipefail
dir=$1; shift
names=("$@")
if ((${#names[@]} == 0)); then
  for b in "$dir"/*; do [[ -f "$b" && -x "$b" ]] && names+=("$(basename "$b")"); done
fi
for n in "${names[@]}"; do
  echo "== bench/$n"
  "$dir/$n"
  echo
done
