#!/usr/bin/env bash
# Runs an example that is its own head and node (those of cluster/, and
# ml/'s allreduce, ring_peers, parameter_server, ps_training) as its header
# says: a head and a node from the program, then the program as the script
# (with the arguments after the program's path), in a home of its own, and
# ends exactly the processes it started.
# Usage: run_in_cluster.sh PROGRAM [ARGS...]
set -euo pipefail
demo=$1
export HOME=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true' EXIT

# Starts "$demo start --block ..." in the background and sets $address once
# it serves.
start() {
  local log=$HOME/log.${#pids[@]}
  "$demo" start --block "$@" > "$log" 2>&1 &
  pids+=($!)
  local line
  line=$(timeout 30 grep -m1 "Started" <(tail -F "$log" 2>/dev/null)) \
    || { echo "a node did not start:"; cat "$log"; exit 1; }
  address=$(sed -E 's/.* at ([^ ]+) .*/\1/' <<< "$line")
}

start --head --port 0
head=$address
start --address "$head"
"$demo" --address="$head" "${@:2}"
