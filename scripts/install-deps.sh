#!/usr/bin/env bash
# Installs the Debian packages zflow needs to build and test, when missing.
# As root it runs apt-get; otherwise it prints the exact command to run.
# Usage: scripts/install-deps.sh [--fuzz] [--docker]
set -euo pipefail

packages=(cmake make gcc pkg-config
          libzmq3-dev libmsgpack-dev libprotobuf-c-dev protobuf-c-compiler
          libsqlite3-dev libcmocka-dev libopenblas-dev libdnnl-dev
          protobuf-compiler python3 python3-zmq python3-protobuf python3-numpy
          python3-pytest)
for arg in "$@"; do
  case "$arg" in
    --fuzz) packages+=(clang libclang-rt-dev) ;;
    --docker) packages+=(docker.io docker-compose debootstrap) ;;
    *) echo "install-deps: unknown option '$arg'" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all dependencies present"
  exit 0
fi

echo "install-deps: missing: ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: run as root:" >&2
  echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${missing[*]}"
