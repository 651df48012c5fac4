#!/usr/bin/env bash
# The layering check: every source file may include only headers of its own
# layer or the layers below it (docs/design.md, "Layers"), and the
# scheduler program links no BLAS, no oneDNN and no CUDA.
#
#   scripts/check-layers.sh [SOURCE_ROOT] [BUILD_DIR]
#
# SOURCE_ROOT defaults to the repository this script is in. With BUILD_DIR,
# BUILD_DIR/bin/zflow-scheduler is checked too. Prints one line per
# violation and exits 1 when there is any, 0 otherwise.
set -euo pipefail

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
build=${2:-}

# The layer of a path (relative to the root), or nothing for paths outside
# the layered code (tests, benchmarks, generated code).
layer_of() {
  case "$1" in
    proto/*) echo 1 ;;
    common/*) echo 2 ;;
    scheduler/graph/*) echo 3 ;;
    executor/engine/* | executor/kernels/* | executor/devices/* | executor/rendezvous/*) echo 4 ;;
    scheduler/master/* | executor/worker/* | session/* | broker/*) echo 5 ;;
    scheduler/server/*) echo 6 ;;
    client/* | scheduler/cmd/* | executor/cmd/*) echo 7 ;;
    *) echo "" ;;
  esac
}

# The subsystem of a layer-5 path: layer-5 subsystems stand side by side
# and do not include each other.
subsystem_of() {
  case "$1" in
    scheduler/master/*) echo master ;;
    executor/worker/*) echo worker ;;
    session/*) echo session ;;
    broker/*) echo broker ;;
  esac
}

bad=0
cd "$root"
while IFS= read -r -d '' file; do
  rel=${file#./}
  from=$(layer_of "$rel")
  [[ -n "$from" ]] || continue
  while IFS= read -r inc; do
    to=$(layer_of "$inc")
    [[ -n "$to" ]] || continue
    if ((to > from)); then
      echo "layering: $rel (layer $from) includes $inc (layer $to)"
      bad=1
    elif ((to == 5 && from == 5)) && [[ $(subsystem_of "$rel") != $(subsystem_of "$inc") ]]; then
      echo "layering: $rel ($(subsystem_of "$rel")) includes $inc ($(subsystem_of "$inc")), a subsystem beside it"
      bad=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(find . \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) \
           -not -path './build*' -not -path './.git/*' -print0)

if [[ -n "$build" ]]; then
  prog="$build/bin/zflow-scheduler"
  if [[ ! -x "$prog" ]]; then
    echo "layering: $prog is missing"
    bad=1
  else
    needed=$(readelf -d "$prog" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    for lib in $needed; do
      case "$lib" in
        *openblas* | *blas.so* | *cudart* | *cublas* | libcuda.so* | libdnnl* | libmkldnn* | libgomp*)
          echo "layering: zflow-scheduler links $lib (the scheduler runs no kernel)"
          bad=1
          ;;
      esac
    done
  fi
fi

if ((bad)); then exit 1; fi
echo "layering: OK"
