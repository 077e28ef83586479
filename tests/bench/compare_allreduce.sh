#!/usr/bin/env bash
# Runs Open MPI's MPI_Allreduce (over loopback TCP, and over shared memory)
# and, where python3-torch is installed, torch.distributed.all_reduce over
# gloo, on the sizes and N of allreduce_bench, in the same run as Lumen's
# allreduce_bench, and prints the ratios. Installs Open MPI if missing; it
# is for this comparison only, never a dependency of Lumen.
# With --rounds=K the whole comparison runs K times, theirs and ours in
# turn, and each figure is the median of its K medians: on a small shared
# machine one side's run can fall into a slow minute that the other's
# missed.
#   tests/bench/compare_allreduce.sh [BUILD_DIR] [--reps=N] [--rounds=K]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-.build}
reps=7
rounds=1
for arg in "${@:2}"; do
  case "$arg" in
    --reps=*) reps=${arg#--reps=} ;;
    --rounds=*) rounds=${arg#--rounds=} ;;
    *)
      echo "compare_allreduce: unknown flag '$arg'; use --reps=N or" \
           "--rounds=K" >&2
      exit 2
      ;;
  esac
done
if ! command -v mpicc > /dev/null; then
  apt-get install -y openmpi-bin libopenmpi-dev > /dev/null
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpicc -O2 -o "$work/mpi_allreduce" tests/bench/mpi_allreduce.c
sizes="4096 262144 940584 4194304 67108864"
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
# Debian's python3-torch is for Debian's python3, which another python3
# earlier on PATH (pyenv, say) does not see.
torch_python=""
for py in /usr/bin/python3 python3; do
  if "$py" -c 'import torch.distributed' 2> /dev/null; then
    torch_python=$py
    break
  fi
done
[ -n "$torch_python" ] ||
  echo "compare_allreduce: python3-torch is not installed: no torch/gloo" \
       "figures" >&2
for ((round = 0; round < rounds; ++round)); do
  for n in 2 3 4; do
    "${mpi[@]}" -np $n --mca btl self,tcp --mca btl_tcp_if_include lo \
      "$work/mpi_allreduce" mpi_tcp "$reps" $sizes >> "$work/theirs.json"
    "${mpi[@]}" -np $n "$work/mpi_allreduce" mpi_shm "$reps" $sizes \
      >> "$work/theirs.json"
  done
  if [ -n "$torch_python" ]; then
    "$torch_python" tests/bench/gloo_allreduce.py "$reps" $sizes \
      >> "$work/theirs.json"
  fi
  "$build/tests/bench/allreduce_bench" --json --reps="$reps" >> "$work/ours.json"
done
python3 - "$work/ours.json" "$work/theirs.json" <<'PY'
import json, sys
def rounds_joined(path):
    # One figure per name, N and size: the median of the rounds' medians,
    # the least of their minima and of their best times.
    by = {}
    for line in open(path):
        f = json.loads(line)
        if "median" in f:
            by.setdefault((f["name"], f.get("n"), f.get("bytes")), []).append(f)
    out = []
    for fs in by.values():
        f = dict(fs[0])
        meds = sorted(x["median"] for x in fs)
        k = len(meds)
        f["median"] = meds[k // 2] if k % 2 else (meds[k // 2 - 1] + meds[k // 2]) / 2
        f["min"] = min(x["min"] for x in fs)
        if "t_min_us" in f:
            f["t_min_us"] = min(float(x["t_min_us"]) for x in fs)
        f["rounds"] = k
        out.append(f)
    return out
ours = rounds_joined(sys.argv[1])
theirs = rounds_joined(sys.argv[2])
print(json.dumps({"bench": "compare_allreduce",
                  "note": "busbw GB/s, medians and bests; ratio = ours / theirs (medians)", "rounds": max(f["rounds"] for f in ours)}))
# Which of ours is set against which of theirs: processes over TCP against
# MPI over TCP and gloo (processes), ranks in one process and processes
# meeting in shared memory (allreduce_start) against MPI's processes over
# shared memory.
pairs = {"ring_tcp": ["mpi_tcp", "torch_gloo"], "ring_inproc": ["mpi_shm"],
         "started_shm": ["mpi_shm"]}
rows = []
for o in ours:
    for t in theirs:
        if t["name"] in pairs.get(o["name"], []) and t["n"] == o["n"] and t["bytes"] == o["bytes"]:
            rows.append((o["name"], o["n"], o["bytes"], t["name"], o, t))
print("%-12s %-3s %10s %-10s %10s %10s %7s %10s %10s %7s %s" % (
    "ours", "N", "bytes", "vs", "ours med", "theirs med", "ratio",
    "ours best", "theirs best", "t ratio", "algorithm"))
for name, n, b, vs, o, t in sorted(rows, key=lambda r: (r[0], r[1], r[2], r[3])):
    ratio = o["median"] / t["median"]
    # The best repetition, from the shortest time per operation.
    best = lambda f: f["bytes"] / (f["t_min_us"] * 1e-6) * 2 * (n - 1) / n / 1e9
    best_o, best_t = best(o), best(t)
    t_ratio = o["t_min_us"] / t["t_min_us"]
    print("%-12s %-3d %10d %-10s %10.3f %10.3f %6.2fx %10.3f %10.3f %6.2fx %s" % (
        name, n, b, vs, o["median"], t["median"], ratio, best_o, best_t,
        t_ratio, o.get("algorithm", "")))
    print(json.dumps({"bench": "compare_allreduce", "name": name + "_vs_" + vs,
                      "n": n, "bytes": b, "unit": "GB/s", "min": o["min"],
                      "median": o["median"], "baseline": vs, "ratio": ratio,
                      "t_min_us": o["t_min_us"], "baseline_t_min_us": t["t_min_us"],
                      "algorithm": o.get("algorithm", "")}))
# How close the ring comes to what loopback TCP allows: one link per
# member (as across hosts), and all links through this host's loopback.
floors = {(f["name"], f["n"], f["bytes"]): f["median"] for f in ours
          if f["name"] in ("tcp_floor", "tcp_floor_host")}
for o in ours:
    if o["name"] == "ring_tcp":
        link = floors.get(("tcp_floor", o["n"], o["bytes"]))
        host = floors.get(("tcp_floor_host", o["n"], o["bytes"]))
        if link and host:
            print("ring_tcp N=%d %10d bytes: %.2fx of the per-link TCP floor, %.2fx of the one-loopback floor"
                  % (o["n"], o["bytes"], o["median"] / link, o["median"] / host))
for o in ours:
    if o["name"] == "tcp_bulk":
        print("loopback TCP bulk bandwidth: %.2f GB/s" % o["median"])
PY
