#!/bin/bash
# The image's entrypoint: runs the container's command. For the three
# long-running processes it also copies their stdout to /tmp/zflow.out, where
# healthcheck.sh reads the line each prints once it is serving; the process
# itself replaces this shell, so it is PID 1 and gets docker's signals.
set -euo pipefail
case "${1:-}" in
  zflow-broker | zflow-scheduler | zflow-executor)
    : > /tmp/zflow.out
    exec "$@" > >(tee -a /tmp/zflow.out)
    ;;
  *)
    exec "$@"
    ;;
esac
