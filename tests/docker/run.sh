#!/usr/bin/env bash
# The docker-compose environment, tested for real (`make test-docker`):
# builds zflow's image, makes CurveZMQ keys (scripts/docker-keys.sh), starts
# a broker, a scheduler and 3 executors with host networking on 127.0.0.1,
# all with those keys, checks that a client without them is refused, runs a
# job spanning the 3 executors, scales
# to 4, kills an executor during a stream of jobs (every job still ends
# well: the broker runs the ones it hit again), crashes an executor process
# (its container restarts it), and tears everything
# down — also when a check fails.
#
# Installs docker.io, docker-compose and debootstrap when missing (as root),
# starts dockerd when none answers (and stops it again), and builds the base
# image debian:bookworm-slim with debootstrap when it cannot be pulled.
#
# Environment: ZFLOW_DEBIAN_MIRROR (default http://deb.debian.org/debian),
# ZFLOW_KEEP_IMAGE=1 keeps the built image afterwards (default: kept too;
# set ZFLOW_KEEP_IMAGE=0 to remove it).
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
compose_file="$top/docker/docker-compose.yml"
project="zflowtest$$"
image="zflow:latest"
mirror="${ZFLOW_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
work="$top/build-docker"
t0=$(date +%s)
dockerd_pid=""

log() { echo "== [$(($(date +%s) - t0))s] $*"; }
fail() {
  echo "test-docker: FAIL: $*" >&2
  exit 1
}

# ---- tools and the engine --------------------------------------------------------

"$top/scripts/install-deps.sh" --docker
export DOCKER_BUILDKIT=0 # the classic builder: Debian's docker.io has no buildx
mkdir -p "$work"

start_dockerd() {
  if docker info > /dev/null 2>&1; then return; fi
  log "no Docker engine answers: starting dockerd"
  [[ $(id -u) -eq 0 ]] || fail "starting dockerd needs root"
  dockerd > "$work/dockerd.log" 2>&1 &
  dockerd_pid=$!
  for _ in $(seq 60); do
    docker info > /dev/null 2>&1 && return
    kill -0 "$dockerd_pid" 2> /dev/null || break
    sleep 1
  done
  tail -20 "$work/dockerd.log" >&2
  fail "dockerd did not start (log: $work/dockerd.log)"
}

compose() { docker-compose -p "$project" -f "$compose_file" "$@"; }

teardown() {
  local rc=$?
  set +e
  if [[ $rc -ne 0 ]]; then
    log "failed: the containers' logs"
    compose logs --no-color --tail 40 2>&1 | tail -200
  fi
  log "tearing down"
  compose --profile client down --remove-orphans --timeout 5 > /dev/null 2>&1
  local left
  left=$(docker ps -aq --filter "label=com.docker.compose.project=$project")
  [[ -n "$left" ]] && docker rm -f $left > /dev/null 2>&1
  left=$(docker ps -aq --filter "label=com.docker.compose.project=$project" | wc -l)
  echo "containers left behind: $left"
  [[ "${ZFLOW_KEEP_IMAGE:-1}" == 0 ]] && docker rmi "$image" > /dev/null 2>&1
  rm -rf "$work/keys"
  if [[ -n "$dockerd_pid" ]]; then
    log "stopping the dockerd this test started"
    kill "$dockerd_pid" 2> /dev/null
    wait "$dockerd_pid" 2> /dev/null
  fi
  [[ $rc -eq 0 && $left -ne 0 ]] && rc=1
  log "done, exit $rc"
  exit $rc
}
trap teardown EXIT
trap 'exit 130' INT TERM

start_dockerd

# ---- images -------------------------------------------------------------------------

base_image() {
  local base=debian:bookworm-slim
  if docker image inspect "$base" > /dev/null 2>&1; then return; fi
  log "pulling $base"
  if timeout 60 docker pull "$base" > /dev/null 2>&1; then return; fi
  log "$base cannot be pulled: building it with debootstrap from $mirror"
  local rootfs="$work/rootfs"
  rm -rf "$rootfs"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" > "$work/debootstrap.log" 2>&1 ||
    fail "debootstrap failed (log: $work/debootstrap.log)"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import -c 'CMD ["bash"]' - "$base" > /dev/null
  rm -rf "$rootfs"
}

base_image
log "building $image"
docker build --network host --force-rm -f "$top/docker/Dockerfile" -t "$image" "$top" > "$work/build.log" 2>&1 ||
  {
    tail -40 "$work/build.log" >&2
    fail "docker build failed (log: $work/build.log)"
  }
log "built: $(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1 / 1e6}')"

# ---- the environment ------------------------------------------------------------------

log "making keys"
rm -rf "$work/keys"
ZFLOW_IMAGE=$image "$top/scripts/docker-keys.sh" "$work/keys" > /dev/null ||
  fail "cannot make keys"
export ZFLOW_KEYS_DIR="$work/keys"

# A port nothing listens on, for the broker.
for _ in $(seq 50); do
  port=$((20000 + RANDOM % 30000))
  (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null || break
done
export ZFLOW_PORT=$port ZFLOW_IMAGE=$image ZFLOW_HEARTBEAT_MS=500 ZFLOW_HEARTBEAT_MISSES=3
broker="tcp://127.0.0.1:$port"
W=/job:worker/replica:0/task

# Runs a command in a one-off client container; its stderr, with compose's
# own messages, goes to $work/client.err.
client() { compose run --rm --no-deps -T client "$@" 2> "$work/client.err"; }

# Waits until every container of the project reports healthy.
wait_healthy() {
  local want=$1 ids n healthy
  for _ in $(seq 90); do
    ids=$(compose ps -q)
    n=$(echo "$ids" | grep -c . || true)
    healthy=0
    for id in $ids; do
      [[ $(docker inspect -f '{{.State.Health.Status}}' "$id") == healthy ]] && healthy=$((healthy + 1))
    done
    [[ $n -eq $want && $healthy -eq $want ]] && return
    sleep 1
  done
  compose ps >&2
  fail "expected $want healthy containers, have $healthy of $n"
}

# Waits until `zflow executors` lists want executors; prints the listing.
wait_executors() {
  local want=$1 listing=""
  for _ in $(seq 60); do
    listing=$(client zflow executors 2> /dev/null || true)
    [[ $(echo "$listing" | grep -c "device:CPU:0 CPU") -eq $want ]] && {
      echo "$listing"
      return
    }
    sleep 1
  done
  echo "$listing" >&2
  fail "zflow executors did not list $want executors"
}

log "starting broker, scheduler and 3 executors (broker at $broker)"
compose up -d --scale executor=3 > "$work/up.log" 2>&1 || {
  cat "$work/up.log" >&2
  fail "docker-compose up failed"
}
wait_healthy 5
listing=$(wait_executors 3)
echo "$listing"
for t in 0 1 2; do
  grep -q "^$W:$t/device:CPU:0 CPU" <<< "$listing" || fail "task $t is not listed"
done
grep -q "control=- rendezvous=-" <<< "$listing" || fail "a client was shown executors' endpoints"

log "a client without keys is refused"
if out=$(compose run --rm --no-deps -T -e ZFLOW_KEYS= client zflow executors 2>&1); then
  fail "zflow executors without keys succeeded: $out"
fi
grep -q "UNAUTHENTICATED" <<< "$out" || fail "zflow executors without keys said: $out"

# ---- a job spanning the three executors -------------------------------------------------

log "a job spanning the 3 executors"
feed='x=[[1,0],[0,1]]'
got=$(client zflow run /opt/zflow/examples/three_workers.pbtxt --broker "$broker" --feed "$feed" \
  --fetch y) || fail "the spanning job failed: $(cat "$work/client.err")"
echo "$got"
want=$'y =\n[[20. 22.]\n [43. 51.]]'
[[ "$got" == "$want" ]] || fail "the spanning job printed '$got', expected '$want'"
inproc=$(client zflow run /opt/zflow/examples/three_workers.pbtxt --inprocess --feed "$feed" \
  --fetch y --devices "$W:0/device:CPU:0,$W:1/device:CPU:0,$W:2/device:CPU:0") ||
  fail "the in-process run failed: $(cat "$work/client.err")"
[[ "$got" == "$inproc" ]] || fail "service and in-process results differ: '$got' vs '$inproc'"
# Each executor ran a partition of it.
for id in $(compose ps -q executor); do
  docker logs "$id" 2>&1 | grep -q "registered graph" ||
    fail "executor container $id ran no partition of the spanning job"
done

# ---- a large tensor through shared memory ----------------------------------------------------

# 256 KiB from task 0 to task 1: past the shared-memory threshold (64 KiB),
# so it goes through task 0's arena in the host's /dev/shm (ipc: host).
log "a 256 KiB tensor from task 0 to task 1 through shared memory"
big_graph="
node { name: 'dims' op: 'Const' device: '$W:0/device:CPU:0'
  attr { key: 'dtype' value { type: DT_INT32 } }
  attr { key: 'value' value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } }
    int_val: 256 int_val: 256 } } } }
node { name: 'one' op: 'Const' device: '$W:0/device:CPU:0'
  attr { key: 'dtype' value { type: DT_FLOAT } }
  attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1 } } } }
node { name: 'ones' op: 'Fill' input: 'dims' input: 'one' device: '$W:0/device:CPU:0'
  attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'index_type' value { type: DT_INT32 } } }
node { name: 'neg' op: 'Neg' input: 'ones' device: '$W:1/device:CPU:0'
  attr { key: 'T' value { type: DT_FLOAT } } }
node { name: 'axes' op: 'Const' device: '$W:1/device:CPU:0'
  attr { key: 'dtype' value { type: DT_INT32 } }
  attr { key: 'value' value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } }
    int_val: 0 int_val: 1 } } } }
node { name: 'total' op: 'Sum' input: 'neg' input: 'axes' device: '$W:1/device:CPU:0'
  attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'Tidx' value { type: DT_INT32 } }
  attr { key: 'keep_dims' value { b: false } } }"
got=$(client bash -c "cat > /tmp/big.pbtxt && zflow run /tmp/big.pbtxt --broker '$broker' \
  --fetch total" <<< "$big_graph") || fail "the shared-memory job failed: $(cat "$work/client.err")"
[[ "$got" == $'total =\n-65536.0' || "$got" == $'total =\n-65536.' ]] ||
  fail "the shared-memory job printed '$got', expected -65536"
arena=no
for id in $(compose ps -q executor); do
  logs=$(docker logs "$id" 2>&1)
  grep -q "shared-memory arena /zflow-" <<< "$logs" && arena=yes
  ! grep -q "shared-memory offer .* refused\|no shared-memory arena" <<< "$logs" ||
    fail "executor container $id could not use shared memory: $(grep -m1 "shared-memory" <<< "$logs")"
done
[[ $arena == yes ]] || fail "no executor made a shared-memory arena: the tensor went as bytes"

# ---- scaling ------------------------------------------------------------------------------

log "scaling to 4 executors"
compose up -d --no-recreate --scale executor=4 > "$work/scale.log" 2>&1 || {
  cat "$work/scale.log" >&2
  fail "scaling failed"
}
wait_healthy 6
listing=$(wait_executors 4)
echo "$listing"
grep -q "^$W:3/device:CPU:0 CPU" <<< "$listing" || fail "the 4th executor is not task 3"

# ---- an executor killed during a stream of jobs ---------------------------------------------

# With --place first every job runs on the first device by name, task 0,
# until it is known dead; its container is the one to kill.
victim=""
for id in $(compose ps -q executor); do
  docker logs "$id" 2> /dev/null | head -n 1 | grep -q "^zflow-executor $W:0/device:CPU:0 " && victim=$id
done
[[ -n "$victim" ]] || fail "no executor container says it is task 0"
jobs=60
stream="$work/stream.log"
log "a stream of $jobs jobs; killing task 0's container ($victim) during it"
client bash -c "for i in \$(seq $jobs); do
    out=\$(zflow run /opt/zflow/examples/mlp.pbtxt --broker $broker --place first \
        --timeout-ms 30000 --feed 'x=[[1,2,3,4],[-1,0.5,2,-3]]' --fetch probs 2>&1)
    echo \"job \$i rc=\$? \$(echo \$out)\"
  done" > "$stream" &
stream_pid=$!
for _ in $(seq 300); do
  [[ $(grep -c " rc=0 " "$stream" || true) -ge 10 ]] && break
  sleep 0.2
done
[[ $(grep -c " rc=0 " "$stream" || true) -ge 10 ]] || fail "the stream did not get going: $(cat "$stream")"
docker kill -s KILL "$victim" > /dev/null
log "killed $victim"
wait "$stream_pid" || true
cat "$stream"

n_done=$(grep -c "^job " "$stream" || true)
[[ $n_done -eq $jobs ]] || fail "$n_done of $jobs jobs reported"
# The broker keeps every accepted job and hands a job whose executor died
# (the scheduler answers UNAVAILABLE) to a scheduler again: every job of
# the stream ends well, with the same result.
failed=$(grep -v " rc=0 " "$stream" | grep "^job " || true)
[[ -z "$failed" ]] || fail "jobs failed although the broker runs them again: $failed"
first_ok=$(grep " rc=0 " "$stream" | head -n 1 | sed 's/^job [0-9]* rc=0 //')
while read -r line; do
  [[ "${line#job * rc=0 }" == "$first_ok" ]] || fail "a job printed '$line'"
done < <(grep "^job " "$stream")
broker_id=$(compose ps -q broker)
retried=$(docker logs "$broker_id" 2>&1 | grep -c "it will start again" || true)
log "$jobs of $jobs jobs succeeded; the broker started $retried attempt(s) again"
wait_executors 3 > /dev/null

# ---- an executor process that dies comes back (restart policy) ------------------------------

# `docker kill` above stopped a container by hand, which docker leaves
# stopped; a process that dies on its own is restarted in its container.
crash=""
for id in $(compose ps -q executor); do
  [[ $(docker inspect -f '{{.State.Running}}' "$id") == true ]] && crash=$id && break
done
[[ -n "$crash" ]] || fail "no running executor container to crash"
restarts=$(docker inspect -f '{{.RestartCount}}' "$crash")
log "killing the executor process of $crash from the host"
kill -9 "$(docker inspect -f '{{.State.Pid}}' "$crash")"
for _ in $(seq 60); do
  [[ $(docker inspect -f '{{.RestartCount}}' "$crash") -gt $restarts ]] && break
  sleep 0.5
done
[[ $(docker inspect -f '{{.RestartCount}}' "$crash") -gt $restarts ]] ||
  fail "the crashed executor's container was not restarted"
wait_executors 3 > /dev/null
out=$(client zflow run /opt/zflow/examples/mlp.pbtxt --broker "$broker" --timeout-ms 30000 \
  --feed 'x=[[1,2,3,4],[-1,0.5,2,-3]]' --fetch probs 2>&1) || fail "a job after the restart: $out"
[[ "$(echo $out)" == "$first_ok" ]] || fail "a job after the restart printed '$out'"
log "PASS in $(($(date +%s) - t0)) s"
