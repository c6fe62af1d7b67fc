#!/usr/bin/env bash
# scripts/security-profile.sh [RATE] [BINDIR] — where the cost of SASL_SSL
# goes: one broker with a PLAINTEXT and a SASL_SSL listener (as
# security-bench.sh starts it), loadgen at RATE records/s (default 20000;
# 1 KiB, acks=all, 8 partitions, 4 producers) on each listener in turn for
# 25 s, a 15 s CPU profile of the broker from /debug/pprof/profile in the
# middle of each (as the super user admin). Prints the broker's CPU per
# 100k records and the top entries of each profile, and keeps the profiles
# in $KEEP (default /tmp/sluice-secprof). Binaries from BINDIR (default
# bin/).
set -euo pipefail
RATE=${1:-20000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${2:-$ROOT/bin}
KEEP=${KEEP:-/tmp/sluice-secprof}
W=$(mktemp -d "${TMPDIR:-/tmp}/sluice-secprof.XXXXXX")
mkdir -p "$KEEP"
. "$ROOT/scripts/broker.sh"
PID=
trap 'if [ -n "$PID" ]; then kill $PID 2>/dev/null; wait $PID 2>/dev/null; fi; rm -rf "$W"' EXIT
"$BIN/sluicectl" certs create --dir "$W/certs" --brokers broker --clients x --hosts 127.0.0.1 >/dev/null
echo bench-secret >"$W/pw"
K=$(free_port); S=$(free_port); H=$(free_port); c=$(free_port); p=$(free_port)
"$BIN/sluiced" --data-dir "$W/data" --listeners "PLAINTEXT://127.0.0.1:$K,SASL_SSL://127.0.0.1:$S" \
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
ticks() { awk '{print $14+$15}' /proc/$PID/stat; }
HZ=$(getconf CLK_TCK)
for l in plain secure; do
	if [[ $l == plain ]]; then
		args=(--brokers 127.0.0.1:$K)
	else
		args=(--brokers 127.0.0.1:$S --tls-ca-file "$W/certs/ca.crt" --sasl-mechanism SCRAM-SHA-512 --sasl-user admin --sasl-password-file "$W/pw")
	fi
	"$BIN/loadgen" "${args[@]}" --scenario steady --rate "$RATE" --duration 25s --sizes fixed:1024 \
		--partitions 8 --producers 4 --consumers 0 --acks all --topic "prof-$l" --quiet --json >"$W/$l.json" &
	LG=$!
	sleep 6 # past the connection set-up and the topic's creation
	T0=$(ticks)
	curl -sf --cacert "$W/certs/ca.crt" -u admin:bench-secret -o "$KEEP/$l.prof" \
		"https://127.0.0.1:$H/debug/pprof/profile?seconds=15"
	T1=$(ticks)
	wait $LG
	python3 - "$W/$l.json" "$T0" "$T1" "$HZ" "$l" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t0, t1, hz = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
cpu = (t1 - t0) / hz
rate = r["produced"]["msgs_per_sec"]
print(f'{sys.argv[5]}: {rate:.0f} msgs/s, ack p50 {r["ack_latency"]["p50_ms"]:.2f} p99 {r["ack_latency"]["p99_ms"]:.2f} ms; '
      f'broker CPU {cpu:.2f} s in 15 s = {cpu / (rate * 15) * 1e8:.0f} ms per 100k records')
PY
	go tool pprof -top -nodecount=25 "$BIN/sluiced" "$KEEP/$l.prof" 2>/dev/null | sed -n '4,30p'
done
