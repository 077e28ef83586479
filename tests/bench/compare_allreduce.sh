#!/usr/bin/env bash
# Runs Open MPI's MPI_Allreduce (over loopback TCP, and over shared memory)
# and, where python3-torch is installed, torch.distributed.all_reduce over
# gloo, on the sizes and N of allreduce_bench, in the same run as Lumen's
# allreduce_bench, and prints the ratios. Installs Open MPI if missing; it
# is for this comparison only, never a dependency of Lumen.
#   tests/bench/compare_allreduce.sh [BUILD_DIR] [--reps=N]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
reps=7
[ "${2:-}" != "" ] && reps=${2#--reps=}
if ! command -v mpicc > /dev/null; then
  apt-get install -y openmpi-bin libopenmpi-dev > /dev/null
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpicc -O2 -o "$work/mpi_allreduce" tests/bench/mpi_allreduce.c
sizes="4096 262144 940584 4194304 67108864"
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
for n in 2 3 4; do
  "${mpi[@]}" -np $n --mca btl self,tcp --mca btl_tcp_if_include lo \
    "$work/mpi_allreduce" mpi_tcp "$reps" $sizes >> "$work/theirs.json"
  "${mpi[@]}" -np $n "$work/mpi_allreduce" mpi_shm "$reps" $sizes \
    >> "$work/theirs.json"
done
# Debian's python3-torch is for Debian's python3, which another python3
# earlier on PATH (pyenv, say) does not see.
torch_python=""
for py in /usr/bin/python3 python3; do
  if "$py" -c 'import torch.distributed' 2> /dev/null; then
    torch_python=$py
    break
  fi
done
if [ -n "$torch_python" ]; then
  "$torch_python" tests/bench/gloo_allreduce.py "$reps" $sizes \
    >> "$work/theirs.json"
else
  echo "compare_allreduce: python3-torch is not installed: no torch/gloo" \
       "figures" >&2
fi
"$build/tests/bench/allreduce_bench" --json --reps="$reps" > "$work/ours.json"
python3 - "$work/ours.json" "$work/theirs.json" <<'PY'
import json, sys
ours = [json.loads(l) for l in open(sys.argv[1])]
theirs = [json.loads(l) for l in open(sys.argv[2])]
print(json.dumps({"bench": "compare_allreduce", "note": "busbw GB/s, medians; ratio = ours / theirs"}))
rows = []
for o in ours:
    if o["name"] != "fused_inproc":
        continue
    for t in theirs:
        if t["n"] == o["n"] and t["bytes"] == o["bytes"]:
            rows.append((o["n"], o["bytes"], t["name"], o["min"], o["median"],
                         t["median"], o["t_min_us"], t["t_min_us"]))
print("%-3s %10s %-10s %12s %12s %7s %10s %10s" % ("N", "bytes", "vs", "ours GB/s",
      "theirs GB/s", "ratio", "ours us", "theirs us"))
for n, b, name, lo, m, t, ou, tu in sorted(rows):
    print("%-3d %10d %-10s %12.3f %12.3f %6.2fx %10.1f %10.1f" % (n, b, name, m, t, m / t, ou, tu))
    print(json.dumps({"bench": "compare_allreduce", "name": "fused_inproc_vs_" + name,
                      "n": n, "bytes": b, "unit": "GB/s", "min": lo, "median": m,
                      "baseline": name, "ratio": m / t}))
PY
