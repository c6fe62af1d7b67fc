#!/usr/bin/env bash
# scripts/security-bench.sh [ROUNDS] — one broker with two listeners,
# PLAINTEXT and SASL_SSL (SCRAM-SHA-512 over TLS 1.3, certificates from
# sluicectl certs create), measured in one run with loadgen, alternating
# the two listeners ROUNDS times (default 3) so neither gets the fresher
# broker: the peak produce rate (1 KiB records, acks=all, 8 partitions, 4
# producers, open throttle) and the ack latency at RATE records/s (default
# 20,000; a low RATE, 2,000 say, leaves the cores mostly idle, where a
# difference in latency is the listener's and not the queueing's).
# Prints one line per run and the medians (BENCHMARKS.md).
set -euo pipefail
ROUNDS=${1:-3}
RATE=${RATE:-20000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/sluice-secbench.XXXXXX")
. "$ROOT/scripts/broker.sh"
PID=
trap 'if [ -n "$PID" ]; then kill $PID 2>/dev/null; wait $PID 2>/dev/null; fi; rm -rf "$W"' EXIT
"$ROOT/bin/sluicectl" certs create --dir "$W/certs" --brokers broker --clients x --hosts 127.0.0.1 >/dev/null
echo bench-secret >"$W/pw"
K=$(free_port); S=$(free_port); H=$(free_port); c=$(free_port); p=$(free_port)
"$ROOT/bin/sluiced" --data-dir "$W/data" --listeners "PLAINTEXT://127.0.0.1:$K,SASL_SSL://127.0.0.1:$S" \
	--http-listen 127.0.0.1:$H --inter-broker-listen 127.0.0.1:$(free_port) \
	--etcd-listen-client 127.0.0.1:$c --etcd-listen-peer 127.0.0.1:$p --log-level warn \
	--tls-cert-file "$W/certs/broker.crt" --tls-key-file "$W/certs/broker.key" \
	--security --admin-password-file "$W/pw" --allow-everyone-if-no-acl-found >"$W/broker.log" 2>&1 &
PID=$!
for _ in $(seq 1 120); do
	curl -sf --cacert "$W/certs/ca.crt" https://127.0.0.1:$H/readyz >/dev/null && break
	kill -0 $PID 2>/dev/null || { cat "$W/broker.log" >&2; exit 1; }
	sleep 0.5
done
plain=(--brokers 127.0.0.1:$K)
secure=(--brokers 127.0.0.1:$S --tls-ca-file "$W/certs/ca.crt" --sasl-mechanism SCRAM-SHA-512 --sasl-user admin --sasl-password-file "$W/pw")
run() { # run NAME RATE ARGS...: one loadgen run, its JSON kept
	local name=$1 rate=$2
	shift 2
	"$ROOT/bin/loadgen" "$@" --scenario steady --rate "$rate" --duration 15s --sizes fixed:1024 \
		--partitions 8 --producers 4 --consumers 0 --acks all --quiet --json >"$W/$name.json"
	python3 - "$W/$name.json" "$name" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
a = r["ack_latency"]
print(f'{sys.argv[2]:<22} {r["produced"]["msgs_per_sec"]:>9.0f} msgs/s  ack p50 {a["p50_ms"]:6.2f} p99 {a["p99_ms"]:7.2f} ms')
PY
}
for i in $(seq 1 "$ROUNDS"); do
	if ((i % 2)); then order=(plain secure); else order=(secure plain); fi
	for l in "${order[@]}"; do
		if [[ $l == plain ]]; then args=("${plain[@]}"); else args=("${secure[@]}"); fi
		run "$l-peak-$i" 0 "${args[@]}"
		run "$l-rate-$i" "$RATE" "${args[@]}"
	done
done
python3 - "$W" "$ROUNDS" <<'PY'
import json, statistics, sys
w, n = sys.argv[1], int(sys.argv[2])
def med(l, kind, f):
    return statistics.median(f(json.load(open(f"{w}/{l}-{kind}-{i}.json"))) for i in range(1, n + 1))
for kind, f, unit in [("peak", lambda r: r["produced"]["msgs_per_sec"], "msgs/s"),
                      ("rate", lambda r: r["ack_latency"]["p99_ms"], "ms ack p99 at the rate"),
                      ("rate", lambda r: r["ack_latency"]["p50_ms"], "ms ack p50 at the rate")]:
    p, s = med("plain", kind, f), med("secure", kind, f)
    print(f"median {unit:<22} PLAINTEXT {p:10.2f}  SASL_SSL {s:10.2f}  ratio {s / p:5.2f}")
PY
