#!/usr/bin/env python3
"""Reads the flight records a stalled collective group left (flight-GROUP.json,
or flight-pidPID.json from SIGUSR1) and says where each member was and who
was behind. Only the standard library.

    python3 examples/ml/read_flight_records.py ~/.lumen/flight/flight-grads.json
"""
import json
import sys

# [read]
doc = json.load(open(sys.argv[1]))
print(doc.get("why", ""))
for m in doc["members"]:
    where = f'rank {m["rank"]} of {m["group"]} ({m["host"]}, pid {m["pid"]})'
    print(f'{where}: {m["state"]} for {m["for_s"]:.1f} s, '
          f'{m["operations"]} operations started')
    for r in m["records"][-3:]:  # its last three
        print(f'  {r["seq"]}: {r["op"]} at {r["site"]}, {r["bytes"]} bytes, '
              f'{r["state"]}')
for b in doc.get("behind", []):
    print(f'rank {b["rank"]} is {b["operations_behind"]} operation(s) behind')
# [/read]
