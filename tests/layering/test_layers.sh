#!/usr/bin/env bash
# Tests scripts/check-layers.sh: the repository passes it, and each kind of
# violation planted in a scratch tree (an include from a layer above, an
# include between layer-5 subsystems, a scheduler linking BLAS) fails it
# with a line naming the file.
#   tests/layering/test_layers.sh SOURCE_ROOT BUILD_DIR
set -euo pipefail
src=$1
build=$2
check="$src/scripts/check-layers.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

expect() { # expect CODE TEXT -- ARGS...: runs the check, compares
  local code=$1 text=$2
  shift 3
  local out rc=0
  out=$("$check" "$@" 2>&1) || rc=$?
  if [[ $rc -ne $code || "$out" != *"$text"* ]]; then
    echo "FAIL: check-layers $* exited $rc (want $code), printed:"
    echo "$out"
    echo "(want it to contain: $text)"
    failures=$((failures + 1))
  else
    echo "ok: check-layers $* -> $code ($text)"
  fi
}

plant() { # plant ROOT FILE INCLUDE
  mkdir -p "$1/$(dirname "$2")"
  echo "#include \"$3\"" >"$1/$2"
}

# the repository itself, and its scheduler program
expect 0 "layering: OK" -- "$src" "$build"

# a clean scratch tree
t="$tmp/clean"
plant "$t" common/a.c common/status.h
plant "$t" scheduler/graph/p.c common/graph.h
plant "$t" executor/engine/e.c executor/kernels/kernel.h
plant "$t" scheduler/server/s.c scheduler/master/master.h
plant "$t" client/c.c session/local_session.h
plant "$t" tests/unit/t.c client/cli.h
expect 0 "layering: OK" -- "$t"

# each violation on its own
n=0
while read -r file inc want; do
  n=$((n + 1))
  t="$tmp/bad$n"
  plant "$t" common/ok.c common/status.h
  plant "$t" "$file" "$inc"
  expect 1 "layering: $file $want" -- "$t"
done <<'CASES'
common/a.c scheduler/master/master.h (layer 2) includes scheduler/master/master.h (layer 5)
common/b.h executor/engine/engine.h (layer 2) includes executor/engine/engine.h (layer 4)
scheduler/graph/p.c executor/kernels/kernel.h (layer 3) includes executor/kernels/kernel.h (layer 4)
executor/engine/e.c scheduler/master/master.h (layer 4) includes scheduler/master/master.h (layer 5)
executor/kernels/k.c executor/worker/service.h (layer 4) includes executor/worker/service.h (layer 5)
scheduler/master/m.c scheduler/server/server.h (layer 5) includes scheduler/server/server.h (layer 6)
executor/worker/w.c session/local_session.h (worker) includes session/local_session.h (session), a subsystem beside it
broker/b.c scheduler/master/master.h (broker) includes scheduler/master/master.h (master), a subsystem beside it
CASES

# a scheduler program that links BLAS: the executor program does
mkdir -p "$tmp/build/bin"
cp "$build/bin/zflow-executor" "$tmp/build/bin/zflow-scheduler"
expect 1 "layering: zflow-scheduler links libopenblas" -- "$tmp/clean" "$tmp/build"
rm "$tmp/build/bin/zflow-scheduler"
expect 1 "zflow-scheduler is missing" -- "$tmp/clean" "$tmp/build"

if ((failures)); then
  echo "$failures case(s) failed"
  exit 1
fi
echo "all cases passed"
