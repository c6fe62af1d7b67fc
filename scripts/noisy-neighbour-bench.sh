#!/usr/bin/env bash
# scripts/noisy-neighbour-bench.sh [ROUNDS] — the noisy-neighbour table with
# quotas, and the cost of quota accounting on the single-tenant peak
# (BENCHMARKS.md, "Noisy neighbour, with quotas").
#
# One broker with --security and two listeners (PLAINTEXT, SASL_PLAINTEXT);
# four tenants made over the HTTP admin API as the super user, each with a
# SCRAM user: noisy, quiet, replay (loadgen's noisy-neighbour scenario) and
# peak (the overhead runs). Then, in one run of the same broker:
#   1. before: `loadgen --scenario noisy-neighbour --alone` with no quota;
#   2. noisy's producer_byte_rate set to a tenth of what it wrote alone in
#      1 (QUOTA overrides), with PUT /v1/tenants/noisy/quotas;
#   3. after: the same loadgen run again;
#   4. ROUNDS (default 2) pairs of peak runs of the tenant peak, alternating
#      which goes first: with no quota, and with quotas far above its use
#      (accounting runs on every request, nothing is ever held).
# Prints both tables, the peak runs and their ratio. BIN (default bin/)
# holds sluiced and loadgen.
set -euo pipefail
ROUNDS=${1:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/bin}
W=$(mktemp -d "${TMPDIR:-/tmp}/sluice-noisybench.XXXXXX")
. "$ROOT/scripts/broker.sh"
PID=
trap 'if [ -n "$PID" ]; then kill $PID 2>/dev/null; wait $PID 2>/dev/null; fi; rm -rf "$W"' EXIT
echo bench-admin-secret >"$W/pw"
K=$(free_port); S=$(free_port); H=$(free_port); c=$(free_port); p=$(free_port)
"$BIN/sluiced" --data-dir "$W/data" --listeners "PLAINTEXT://127.0.0.1:$K,SASL_PLAINTEXT://127.0.0.1:$S" \
	--http-listen 127.0.0.1:$H --inter-broker-listen 127.0.0.1:$(free_port) \
	--etcd-listen-client 127.0.0.1:$c --etcd-listen-peer 127.0.0.1:$p --log-level warn \
	--security --admin-password-file "$W/pw" --allow-everyone-if-no-acl-found >"$W/broker.log" 2>&1 &
PID=$!
for _ in $(seq 1 120); do
	curl -sf 127.0.0.1:$H/readyz >/dev/null && break
	kill -0 $PID 2>/dev/null || { cat "$W/broker.log" >&2; exit 1; }
	sleep 0.5
done
admin() { # admin METHOD PATH BODY: the HTTP admin API as the super user
	curl -sSf -u admin:bench-admin-secret -H 'Content-Type: application/json' -X "$1" "http://127.0.0.1:$H$2" -d "$3" >/dev/null
}
for t in noisy quiet replay peak; do
	admin POST /v1/tenants "{\"name\":\"$t\"}"
	admin POST /v1/users "{\"name\":\"$t\",\"tenant\":\"$t\",\"password\":\"$t-secret\"}"
	echo "$t-secret" >"$W/pw-$t"
done
sasl=(--brokers 127.0.0.1:$S --sasl-mechanism SCRAM-SHA-512)
tenant() { echo "name=$1,user=$1,password-file=$W/pw-$1${2:-}"; }
neighbours() { # neighbours NAME: one noisy-neighbour run, its JSON kept
	"$BIN/loadgen" "${sasl[@]}" --scenario noisy-neighbour --alone --duration 10s --rate 2000 \
		--partitions 6 --quiet --json --log-level error \
		--tenant "$(tenant noisy)" --tenant "$(tenant quiet)" --tenant "$(tenant replay ,prefill=500000)" >"$W/$1.json"
}
table() { # table NAME: the run's table (BENCHMARKS.md's columns)
	python3 - "$W/$1.json" "$1" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["tenants"]
print(f"== {sys.argv[2]}")
print(f'{"tenant":<8} {"phase":<9} {"msgs/s":>9} {"MB/s":>7} {"ack p50":>9} {"ack p99":>9} {"fetch p50":>9} {"fetch p99":>9} {"e2e p99":>9} errors')
ms = lambda s: f'{s["p50_ms"]:.1f}' if s["count"] else "-"
ms99 = lambda s: f'{s["p99_ms"]:.1f}' if s["count"] else "-"
for r in runs:
    t, res = r["tenant"], r.get("result") or {}
    if not res:
        print(f'{t["name"]:<8} {r["phase"]:<9} error: {r.get("error")}')
        continue
    if t["role"] == "replay":
        rate, mb = res["replay"]["read_msgs_per_sec"], res["replay"]["read_mb_per_sec"]
    else:
        rate, mb = res["produced"]["msgs_per_sec"], res["produced"]["mb_per_sec"]
    errs = sum((res.get("errors") or {}).values())
    print(f'{t["name"]:<8} {r["phase"]:<9} {rate:>9.0f} {mb:>7.2f} {ms(res["ack_latency"]):>9} {ms99(res["ack_latency"]):>9} '
          f'{ms(res["fetch_latency"]):>9} {ms99(res["fetch_latency"]):>9} {ms99(res["e2e_latency"]):>9} {errs}')
PY
}
neighbours before
table before
QUOTA=${QUOTA:-$(python3 - "$W/before.json" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["tenants"]
r = next(r for r in runs if r["tenant"]["name"] == "noisy" and r["phase"] == "alone")
print(int(r["result"]["produced"]["bytes"] / r["result"]["produce_seconds"] / 10))
PY
)}
echo "noisy: producer_byte_rate $QUOTA (a tenth of what it wrote alone)"
admin PUT /v1/tenants/noisy/quotas "{\"set\":{\"producer_byte_rate\":$QUOTA}}"
sleep 2 # the quota follower applies a change within about a second
neighbours after
table after

far='{"set":{"producer_byte_rate":1e12,"producer_record_rate":1e12,"consumer_byte_rate":1e12,"request_percentage":102400}}'
none='{"remove":["producer_byte_rate","producer_record_rate","consumer_byte_rate","request_percentage"]}'
peak() { # peak NAME: the tenant peak as fast as it can, 15 s
	"$BIN/loadgen" --brokers 127.0.0.1:$S --sasl-mechanism SCRAM-SHA-512 --sasl-user peak --sasl-password-file "$W/pw-peak" \
		--scenario steady --rate 0 --duration 15s --sizes fixed:1024 --partitions 8 --producers 4 --consumers 0 \
		--acks all --quiet --json --log-level error >"$W/$1.json"
	python3 - "$W/$1.json" "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
a = r["ack_latency"]
print(f'{sys.argv[2]:<10} {r["produced"]["msgs_per_sec"]:>9.0f} msgs/s  ack p50 {a["p50_ms"]:7.2f} p99 {a["p99_ms"]:7.2f} ms')
PY
}
for i in $(seq 1 "$ROUNDS"); do
	if ((i % 2)); then order=(none far); else order=(far none); fi
	for q in "${order[@]}"; do
		if [[ $q == none ]]; then admin PUT /v1/tenants/peak/quotas "$none"; else admin PUT /v1/tenants/peak/quotas "$far"; fi
		sleep 2
		peak "$q-$i"
	done
done
python3 - "$W" "$ROUNDS" <<'PY'
import json, statistics, sys
w, n = sys.argv[1], int(sys.argv[2])
rate = lambda q, i: json.load(open(f"{w}/{q}-{i}.json"))["produced"]["msgs_per_sec"]
for i in range(1, n + 1):
    print(f"round {i}: quotas far above use / none = {rate('far', i) / rate('none', i):.3f}")
a = statistics.median(rate("none", i) for i in range(1, n + 1))
b = statistics.median(rate("far", i) for i in range(1, n + 1))
print(f"median: none {a:.0f} msgs/s, quotas {b:.0f} msgs/s, ratio {b / a:.3f}")
PY
