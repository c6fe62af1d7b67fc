#!/usr/bin/env bash
# scripts/console-canary-bench.sh [ROUNDS] — the cost of the canary and of a
# polled console page (issue 23): one fresh sluiced per arm, "off" (no
# --canary, nobody on the console) and "on" (--canary, and GET /ui/groups
# once a second through the run), alternating ROUNDS times (default 2) so
# neither arm gets the quieter minute. Each arm: loadgen steady at RATE
# records/s (default 20,000; 1 KiB, acks=all, 8 partitions, 2 producers,
# 1 consumer group member) for DURATION (default 15s), the broker's CPU
# (utime+stime of the sluiced process, /proc/PID/stat) over the loadgen
# run, and the ack p99 loadgen measured. Before the load, the broker's CPU
# over IDLE (default 10s) with nothing but the arm's own work (the canary,
# the polled page; the console's lag sampler and the broker's timers in
# both arms): the cost itself, without the load's noise. Then, beside it,
# latprobe (the
# shared open-loop probe, LATPROBE=path, skipped when unset) at LOWRATE
# records/s (default 1,000) for 10 s against the same broker. Prints one
# line per arm and the medians (BENCHMARKS.md, "Canary and console").
#
# ARMS (default "off on") may also name "canary" (--canary alone) and
# "console" (the polled page alone), to split the cost; LOAD=0 measures
# the idle CPU only (no loadgen, no latprobe), over IDLE seconds.
set -euo pipefail
ROUNDS=${1:-2}
RATE=${RATE:-20000}
DURATION=${DURATION:-15s}
LOWRATE=${LOWRATE:-1000}
LATPROBE=${LATPROBE:-}
IDLE=${IDLE:-10}
LOAD=${LOAD:-1}
read -r -a ARMS <<<"${ARMS:-off on}"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/sluice-canarybench.XXXXXX")
. "$ROOT/scripts/broker.sh"
PID= POLL=
stop() {
	if [ -n "$POLL" ]; then kill "$POLL" 2>/dev/null || true; wait "$POLL" 2>/dev/null || true; POLL=; fi
	if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; PID=; fi
}
trap 'stop; rm -rf "$W"' EXIT
TICK=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }

arm() { # arm NAME ROUND: one broker, one loadgen run, one latprobe run
	local name=$1 round=$2 dir="$W/$1-$2" extra=() c p
	mkdir -p "$dir"
	[[ $name == on || $name == canary ]] && extra=(--canary)
	K=$(free_port); H=$(free_port); c=$(free_port); p=$(free_port)
	"$ROOT/bin/sluiced" --data-dir "$dir/data" --kafka-listen 127.0.0.1:$K --http-listen 127.0.0.1:$H \
		--inter-broker-listen 127.0.0.1:$(free_port) --etcd-listen-client 127.0.0.1:$c --etcd-listen-peer 127.0.0.1:$p \
		--log-level warn "${extra[@]}" >"$dir/broker.log" 2>&1 &
	PID=$!
	for _ in $(seq 1 120); do
		curl -sf 127.0.0.1:$H/readyz >/dev/null && break
		kill -0 $PID 2>/dev/null || { cat "$dir/broker.log" >&2; exit 1; }
		sleep 0.5
	done
	sleep 3 # the canary's topic and group made, its first rounds done
	if [[ $name == on || $name == console ]]; then
		(while :; do curl -s -o /dev/null -w '%{http_code}\n' 127.0.0.1:$H/ui/groups >>"$dir/polls"; sleep 1; done) &
		POLL=$!
	fi
	local c0 c1 i0 i1
	i0=$(cpu $PID)
	sleep "$IDLE"
	i1=$(cpu $PID)
	if [[ $LOAD == 0 ]]; then
		local polls=0
		[ -f "$dir/polls" ] && polls=$(grep -c '^200$' "$dir/polls" || true)
		stop
		python3 -c 'import json,sys; print(json.dumps({"arm": sys.argv[1], "round": int(sys.argv[2]), "idle_cpu_ms_per_s": round(int(sys.argv[3]) / int(sys.argv[4]) * 1000 / float(sys.argv[5]), 1), "console_polls_200": int(sys.argv[6]), "load1": float(sys.argv[7])}))' \
			"$name" "$round" "$((i1 - i0))" "$TICK" "$IDLE" "$polls" "$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$W/lines"
		return
	fi
	c0=$(cpu $PID)
	local w0 w1
	w0=$(date +%s%N)
	"$ROOT/bin/loadgen" --brokers 127.0.0.1:$K --scenario steady --rate "$RATE" --duration "$DURATION" --sizes fixed:1024 \
		--partitions 8 --producers 2 --consumers 1 --acks all --quiet --json --log-level error >"$dir/loadgen.json"
	c1=$(cpu $PID)
	w1=$(date +%s%N)
	local probe=""
	if [ -n "$LATPROBE" ]; then
		"$LATPROBE" kafka --brokers 127.0.0.1:$K --topic lowrate --partitions 8 --rate "$LOWRATE" --duration 10s --size 1024 >"$dir/latprobe.out" 2>&1 || true
		probe=$(sed -n 's/^RESULT //p' "$dir/latprobe.out" | tail -1)
	fi
	local polls=0
	[ -f "$dir/polls" ] && polls=$(grep -c '^200$' "$dir/polls" || true)
	stop
	python3 - "$dir/loadgen.json" "$name" "$round" "$(((c1 - c0)))" "$TICK" "$polls" "$(cut -d' ' -f1 /proc/loadavg)" "$probe" "$((i1 - i0))" "$IDLE" "$(((w1 - w0) / 1000000))" <<'PY' | tee -a "$W/lines"
import json, sys
r = json.load(open(sys.argv[1]))
name, rnd, ticks, hz, polls, load, probe = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7], sys.argv[8]
acked = r["produced"]["records"]
idle_ms_per_s = int(sys.argv[9]) / hz * 1000 / float(sys.argv[10])
cpu_s = ticks / hz
a = r["ack_latency"]
print(json.dumps({"arm": name, "round": int(rnd), "acked": acked, "msgs_per_sec": round(r["produced"]["msgs_per_sec"]),
                  "idle_cpu_ms_per_s": round(idle_ms_per_s, 1), "cpu_s": cpu_s, "cpu_per_s": round(cpu_s / (int(sys.argv[11]) / 1000), 3), "cpu_us_per_rec": round(cpu_s / max(acked, 1) * 1e6, 2),
                  "ack_p50_ms": a["p50_ms"], "ack_p99_ms": a["p99_ms"], "console_polls_200": int(polls), "load1": float(load),
                  "latprobe": json.loads(probe) if probe else None}))
PY
}
for i in $(seq 1 "$ROUNDS"); do
	order=("${ARMS[@]}")
	if ! ((i % 2)); then for ((j = ${#ARMS[@]} - 1, k = 0; j >= 0; j--, k++)); do order[k]=${ARMS[j]}; done; fi
	for a in "${order[@]}"; do arm "$a" "$i"; done
done
python3 - "$W/lines" "$LOAD" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
if sys.argv[2] == "0":
    for arm in dict.fromkeys(r["arm"] for r in rows):
        v = [r["idle_cpu_ms_per_s"] for r in rows if r["arm"] == arm]
        print(f"median idle CPU ms per s  {arm:<8} {statistics.median(v):7.1f}  (rounds: {v})")
    sys.exit(0)
def med(arm, f):
    return statistics.median(f(r) for r in rows if r["arm"] == arm)
for what, f in [("idle CPU ms per s", lambda r: r["idle_cpu_ms_per_s"]), ("CPU µs per acked record", lambda r: r["cpu_us_per_rec"]), ("ack p99 ms (loadgen)", lambda r: r["ack_p99_ms"]),
                ("ack p50 ms (loadgen)", lambda r: r["ack_p50_ms"])] + (
                [("ack p99 ms (latprobe, low rate)", lambda r: r["latprobe"]["p99_ms"]),
                 ("ack p50 ms (latprobe, low rate)", lambda r: r["latprobe"]["p50_ms"])] if all(r["latprobe"] for r in rows) else []):
    off, on = med("off", f), med("on", f)
    print(f"median {what:<32} off {off:9.2f}  on {on:9.2f}  on/off {on / off:5.3f}")
idle = med("on", lambda r: r["idle_cpu_ms_per_s"]) - med("off", lambda r: r["idle_cpu_ms_per_s"])
busy = med("off", lambda r: r["cpu_per_s"]) * 1000
print(f"the arm's own cost (idle on - idle off) {idle:.1f} ms CPU per s = {100 * idle / busy:.2f}% of the off arm's CPU at the rate ({busy:.0f} ms per s)")
PY
