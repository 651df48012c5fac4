#!/bin/bash
# Docker health check for a zflow container: healthcheck.sh broker|scheduler|executor.
#   broker     answers a ListExecutors on $ZFLOW_BROKER
#   scheduler  has printed that it is connected and registered
#   executor   the broker lists this process's device name as live
set -uo pipefail
ready=$(head -n 1 /tmp/zflow.out 2>/dev/null || true)
case "${1:-}" in
  broker)
    zflow executors --timeout-ms 2000 > /dev/null
    ;;
  scheduler)
    [[ "$ready" == "zflow-scheduler connected to "* ]]
    ;;
  executor)
    # "zflow-executor NAME control ENDPOINT rendezvous ENDPOINT"; a secure
    # broker shows clients names, not endpoints, and a live name is unique
    read -r _ name _ <<< "$ready"
    [[ -n "${name:-}" ]] && zflow executors --timeout-ms 2000 | grep -qF "$name "
    ;;
  *)
    echo "usage: healthcheck.sh broker|scheduler|executor" >&2
    exit 2
    ;;
esac
