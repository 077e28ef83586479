#!/bin/sh
# Starts a head and a node that load libjob.so, runs the driver against
# them and stops them. check_install.cmake runs it as
#   sh run_cluster.sh BUILD_DIR
# with the installed bin/ first on PATH and HOME a scratch folder, so that
# `lumen stop` ends exactly these two. Stops at the first step that fails,
# with its exit code; check_install.cmake stops the cluster then.
set -eu
cd "$1"
# [start-and-run]
lumen start --head --port 0 --code-path libjob.so >head.txt
address=$(sed -n 's/^Started head at \([^ ]*\) .*/\1/p' head.txt)
lumen start --address "$address" --code-path libjob.so
./driver --address="$address"
lumen stop
# [/start-and-run]
