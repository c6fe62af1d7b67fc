#!/usr/bin/env bash
# scripts/latency.sh SLUICED RATE — one loadgen steady run (8 s, 1 KiB,
# acks=all, 6 partitions, 2 producers, 2 consumers) against a fresh broker
# started from the given binary; prints its ack and end-to-end p50/p99.
# Used to compare two builds at the same offered rate (docs/profiling.md).
set -euo pipefail
BIN=$1
RATE=$2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/sluice-lat.XXXXXX")
. "$ROOT/scripts/broker.sh"
PID=
trap 'if [ -n "$PID" ]; then kill $PID 2>/dev/null; wait $PID 2>/dev/null; fi; rm -rf "$W"' EXIT
start_broker "$BIN" "$W"
"$ROOT/bin/loadgen" --brokers 127.0.0.1:$K --scenario steady --rate "$RATE" --duration 8s --sizes fixed:1024 \
  --partitions 6 --producers 2 --consumers 2 --acks all --quiet --json > "$W/r.json"
python3 - "$W/r.json" "$BIN" "$RATE" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
a, e = r["ack_latency"], r["e2e_latency"]
print(f'{sys.argv[2]} rate {sys.argv[3]}: ack p50 {a["p50_ms"]:.2f} p99 {a["p99_ms"]:.2f} ms; e2e p50 {e["p50_ms"]:.2f} p99 {e["p99_ms"]:.2f} ms')
PY
