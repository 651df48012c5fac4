#!/bin/sh
# apt-cuda.sh ON|OFF PACKAGE...: with ON, enables Debian's contrib and
# non-free sections and installs the CUDA packages named; with OFF, nothing.
set -eu
mode=$1
shift
case "$mode" in
  OFF | off | 0) exit 0 ;;
  ON | on | 1) ;;
  *) echo "apt-cuda.sh: ZFLOW_CUDA must be ON or OFF, not '$mode'" >&2; exit 2 ;;
esac
. /etc/os-release
echo "deb http://deb.debian.org/debian $VERSION_CODENAME contrib non-free non-free-firmware" \
  > /etc/apt/sources.list.d/zflow-non-free.list
apt-get update -qq
apt-get install -y -qq --no-install-recommends "$@"
rm -rf /var/lib/apt/lists/*
