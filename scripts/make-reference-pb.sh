#!/usr/bin/env bash
# Regenerates tests/data/reference/*.pb: the TensorFlow test graphs
# (tests/data/tensorflow/*.pbtxt) encoded as binary GraphDefs by
# Google's protobuf (protoc --encode, the library TensorFlow itself uses),
# with our schemas. Tests check that zflow reads these binaries and that its
# own text parser yields the same messages. Needs protobuf-compiler; run it
# by hand when the test graphs or the schemas change.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
src=${1:-$top/tests/data/tensorflow}
out=$top/tests/data/reference
command -v protoc >/dev/null || { echo "needs protoc: apt-get install protobuf-compiler" >&2; exit 1; }
mkdir -p "$out"
rm -f "$out"/*.pb
n=0
for f in "$src"/*.pbtxt; do
  b=$(basename "$f" .pbtxt)
  if protoc --encode=tensorflow.GraphDef -I "$top/proto" "$top/proto/graph.proto" <"$f" >"$out/$b.pb" 2>/dev/null; then
    n=$((n + 1))
  else
    rm -f "$out/$b.pb"
    echo "skipped $b: not a GraphDef Google's parser accepts"
  fi
done
echo "wrote $n reference binaries to $out"
