#!/usr/bin/env bash
# Writes a key directory for the docker-compose environment: every role's
# CurveZMQ keypair (`zflow keygen`, run in the image), owned by the image's
# zflow user (uid 10001), which alone may read the secret keys (mode 0600).
#
#   scripts/docker-keys.sh DIR     (make keys: DIR = docker/keys)
#
# Environment: ZFLOW_IMAGE, the image to run (default zflow:latest).
set -euo pipefail
dir=${1:?usage: docker-keys.sh DIR}
image=${ZFLOW_IMAGE:-zflow:latest}
if [[ -e "$dir/client.key" ]]; then
  echo "docker-keys: $dir already holds keys; remove it to make new ones" >&2
  exit 1
fi
mkdir -p "$dir"
abs=$(cd "$dir" && pwd)
docker run --rm --user 0 --entrypoint /bin/sh -v "$abs:/keys" "$image" \
  -c 'zflow keygen /keys && chown -R 10001:10001 /keys && chmod 700 /keys'
echo "keys: $abs"
