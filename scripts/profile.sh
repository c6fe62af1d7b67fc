#!/usr/bin/env bash
# scripts/profile.sh SLUICED [RATE] — profile one sluiced binary under the
# loadgen steady scenario: it starts the broker on free ports, drives RATE
# records/s (1 KiB, acks=all, 6 partitions, 2 producers, 2 consumers) for
# 25 s, takes a 15 s CPU profile from /debug/pprof/profile in the middle,
# and prints the broker's CPU time per 100k records and the top costs.
# Used for the before/after in BENCHMARKS.md.
set -euo pipefail
BIN=$1
RATE=${2:-60000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-prof.XXXXXX")
. "$ROOT/scripts/broker.sh"
PID=
trap 'if [ -n "$PID" ]; then kill $PID 2>/dev/null; wait $PID 2>/dev/null; fi; rm -rf "$WORK"' EXIT
start_broker "$BIN" "$WORK"
"$ROOT/bin/loadgen" --brokers 127.0.0.1:$K --scenario steady --rate "$RATE" --duration 25s \
  --sizes fixed:1024 --partitions 6 --producers 2 --consumers 2 --acks all --quiet --json > "$WORK/result.json" &
LG=$!
sleep 6
ticks() { awk '{print $14+$15}' /proc/$PID/stat; }
T0=$(ticks)
curl -sf -o "$WORK/cpu.prof" "127.0.0.1:$H/debug/pprof/profile?seconds=15"
T1=$(ticks)
wait $LG
HZ=$(getconf CLK_TCK)
python3 - "$WORK/result.json" "$T0" "$T1" "$HZ" "$RATE" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t0, t1, hz, rate = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
cpu = (t1 - t0) / hz
def find(d, *keys):
    for k in keys:
        if isinstance(d, dict) and k in d:
            return d[k]
    return None
print(f"broker CPU over the 15 s profile: {cpu:.2f} s = {cpu/15*100:.0f}% of one core at {rate:.0f} records/s offered")
print(f"broker CPU per 100k records: {cpu / (rate*15) * 1e5 * 1000:.0f} ms")
PY
go tool pprof -top -nodecount=18 "$BIN" "$WORK/cpu.prof" 2>/dev/null | sed -n "5,26p"
go tool pprof -top -cum -focus=Syscall6 -nodecount=40 "$BIN" "$WORK/cpu.prof" 2>/dev/null | grep -E "Sync|Write|Read|write|fsync|sendmsg|recv" | head -12
