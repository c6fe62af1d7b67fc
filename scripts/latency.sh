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
fp() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
K=$(fp); H=$(fp); C=$(fp); P=$(fp)
"$BIN" --data-dir "$W/d" --kafka-listen 127.0.0.1:$K --http-listen 127.0.0.1:$H \
  --etcd-listen-client 127.0.0.1:$C --etcd-listen-peer 127.0.0.1:$P --log-level warn > "$W/log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 1 120); do curl -sf 127.0.0.1:$H/readyz >/dev/null && break; sleep 0.5; done
"$ROOT/bin/loadgen" --brokers 127.0.0.1:$K --scenario steady --rate "$RATE" --duration 8s --sizes fixed:1024 \
  --partitions 6 --producers 2 --consumers 2 --acks all --quiet --json > "$W/r.json"
python3 - "$W/r.json" "$BIN" "$RATE" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
a, e = r["ack_latency"], r["e2e_latency"]
print(f'{sys.argv[2]} rate {sys.argv[3]}: ack p50 {a["p50_ms"]:.2f} p99 {a["p99_ms"]:.2f} ms; e2e p50 {e["p50_ms"]:.2f} p99 {e["p99_ms"]:.2f} ms')
PY
