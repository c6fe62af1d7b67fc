#!/usr/bin/env bash
# scripts/cluster-bench.sh — acks=all produce throughput and ack latency of
# one broker and of the three-broker loopback cluster (deploy/cluster.sh), in
# one run so the ratios compare: for each, a run as fast as possible and a
# run at a fixed offered rate, the fixed rate first (a run at full speed
# leaves gigabytes to upload to the object store, which would compete with
# it). 1 KiB records, 6 partitions, 2 producers, no
# consumers. Prints a markdown table (BENCHMARKS.md, "Three brokers").
# Knobs: DUR (default 10s), RATE (default 20000), RUNS (default 1).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DUR=${DUR:-10s}
RATE=${RATE:-20000}
RUNS=${RUNS:-1}
W=$(mktemp -d "${TMPDIR:-/tmp}/sluice-cbench.XXXXXX")
. "$ROOT/scripts/broker.sh"
PID=
cleanup() {
	if [ -n "$PID" ]; then kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; fi
	SLUICED="$ROOT/bin/sluiced" KAFKA_BASE=29090 HTTP_BASE=28080 ETCD_BASE=22379 "$ROOT/deploy/cluster.sh" stop "$W/cluster" >/dev/null 2>&1 || true
	rm -rf "$W"
}
trap cleanup EXIT
(cd "$ROOT" && make -s build)

N=0
run() { # run LABEL BROKERS RATE
	N=$((N + 1))
	# Start each run on a quiet disk: a run at full speed leaves gigabytes
	# of dirty pages whose writeback would otherwise delay the next run's
	# fsyncs.
	sync
	sleep 2
	"$ROOT/bin/loadgen" --brokers "$2" --scenario steady --rate "$3" --duration "$DUR" --sizes fixed:1024 \
		--partitions 6 --producers 2 --consumers 0 --acks all --quiet --json --label "$1" > "$W/r$(printf %03d $N).json"
}

for _ in $(seq 1 "$RUNS"); do
	mkdir -p "$W/one"
	start_broker "$ROOT/bin/sluiced" "$W/one"
	run "one broker" "127.0.0.1:$K" "$RATE"
	run "one broker" "127.0.0.1:$K" 0
	kill $PID; wait $PID 2>/dev/null || true; PID=; rm -rf "$W/one"

	SLUICED="$ROOT/bin/sluiced" KAFKA_BASE=29090 HTTP_BASE=28080 ETCD_BASE=22379 "$ROOT/deploy/cluster.sh" start "$W/cluster" >/dev/null
	run "three brokers" "127.0.0.1:29091,127.0.0.1:29092,127.0.0.1:29093" "$RATE"
	run "three brokers" "127.0.0.1:29091,127.0.0.1:29092,127.0.0.1:29093" 0
	SLUICED="$ROOT/bin/sluiced" KAFKA_BASE=29090 HTTP_BASE=28080 ETCD_BASE=22379 "$ROOT/deploy/cluster.sh" stop "$W/cluster" >/dev/null
	rm -rf "$W/cluster"
done

python3 - "$W"/r*.json <<'PY'
import json, sys
rows = [json.load(open(f)) for f in sys.argv[1:]]
print("| setup | offered rate (msgs/s) | acked msgs/s | MB/s | ack p50 ms | ack p99 ms | ack p999 ms | failed |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    a, p = r["ack_latency"], r["produced"]
    rate = "max" if not r.get("target_rate") else f"{r['target_rate']:.0f}"
    print(f'| {r.get("label","")} | {rate} | {p["msgs_per_sec"]:.0f} | {p["mb_per_sec"]:.1f} | {a["p50_ms"]:.2f} | {a["p99_ms"]:.2f} | {a["p999_ms"]:.2f} | {p.get("failed",0)} |')
PY
