#!/usr/bin/env bash
# scripts/bench.sh — Sluice's benchmark suite (what `make bench` runs).
#
# Builds bin/sluiced and bin/loadgen, runs the Go micro-benchmarks of wal and
# broker, measures this machine's limits (fsynced sequential append with fio,
# loopback bandwidth with iperf3), then runs the standard loadgen suite on
#   - one Sluice broker (acks=all; the WAL fsyncs every group commit),
#   - NATS JetStream (file storage, R1) with its default sync policy,
#   - NATS JetStream with sync_interval: always (durable compared with durable),
# and writes BENCHMARKS.md: every figure is the median of BENCH_RUNS runs with
# min and max.
#
# Everything it starts (brokers, nats-server, iperf3) runs on 127.0.0.1 with
# free ports and is stopped by the EXIT trap; data lives in a temp dir.
#
# Knobs (environment): BENCH_RUNS (3), BENCH_DURATION (6s, main runs),
# BENCH_SHORT_DURATION (3s, other scenarios), BENCH_DRAIN_TIMEOUT (15s, peak drain and catch-up),
# BENCH_COMMON_RATE (2000 msgs/s offered to every system), BENCH_OUT (BENCHMARKS.md),
# BENCH_SKIP_GO=1 (skip go test -bench), BENCH_SYSTEMS ("sluice js-default js-always").
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
RUNS=${BENCH_RUNS:-3}
DUR=${BENCH_DURATION:-6s}
SHORT=${BENCH_SHORT_DURATION:-3s}
DRAIN=${BENCH_DRAIN_TIMEOUT:-15s}
COMMON=${BENCH_COMMON_RATE:-2000}
OUT=${BENCH_OUT:-$ROOT/BENCHMARKS.md}
SYSTEMS=${BENCH_SYSTEMS:-"sluice js-default js-always"}
NATS_VERSION=v2.15.2
PRODUCERS=2
CONSUMERS=2
PARTITIONS=6

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-bench.XXXXXX")
RES=$WORK/results
mkdir -p "$RES"
declare -a PIDS=()
STARTED=$(date +%s)

log() { printf '[bench %4ds] %s\n' "$(( $(date +%s) - STARTED ))" "$*" >&2; }

stop_pid() {
	local pid=$1
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 200); do
		kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

wait_tcp() { # host port timeout_s
	local deadline=$(( $(date +%s) + $3 ))
	until (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; do
		[ "$(date +%s)" -lt "$deadline" ] || { log "nothing listens on $1:$2"; return 1; }
		sleep 0.1
	done
}

need_apt() { # command package
	command -v "$1" >/dev/null && return 0
	log "installing $2 (apt-get)"
	if [ "$(id -u)" = 0 ]; then apt-get install -y -qq "$2" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$2" >/dev/null; }
	else sudo apt-get install -y -qq "$2" >/dev/null; fi
}

# ---------------------------------------------------------------- build
log "building bin/sluiced and bin/loadgen"
mkdir -p bin
go build -o bin/ ./cmd/sluiced ./cmd/loadgen
LOADGEN=$ROOT/bin/loadgen
SLUICED=$ROOT/bin/sluiced

GOBIN_DIR=$(go env GOPATH)/bin
export PATH=$PATH:$GOBIN_DIR
if ! command -v nats-server >/dev/null; then
	log "installing nats-server $NATS_VERSION (go install)"
	go install "github.com/nats-io/nats-server/v2@$NATS_VERSION"
fi
need_apt fio fio
need_apt iperf3 iperf3

# ---------------------------------------------------------------- go micro-benchmarks
if [ "${BENCH_SKIP_GO:-0}" != 1 ]; then
	log "go test -bench ./wal/ ./broker/"
	if ! go test -run '^$' -bench . -skip TieredReplay -benchtime 2s ./wal/ ./broker/ >"$RES/go-bench.txt" 2>&1; then
		log "go benchmarks failed (see BENCHMARKS.md)"
		echo "FAILED" >>"$RES/go-bench.txt"
	fi
fi

# ---------------------------------------------------------------- machine limits
log "machine limits: fio (fsynced sequential append) and iperf3 (loopback)"
mkdir -p "$WORK/fio"
for i in $(seq 1 "$RUNS"); do
	for bs in 64k 1m; do
		fio --name=seq --rw=write --bs=$bs --size=256m --fsync=1 --ioengine=psync --directory="$WORK/fio" \
			--output-format=json >"$RES/fio-$bs-$i.json" 2>/dev/null
		rm -f "$WORK/fio"/*
	done
done
IPERF_PORT=$(free_port)
iperf3 -s -B 127.0.0.1 -p "$IPERF_PORT" >/dev/null 2>&1 &
PIDS+=($!)
IPERF_PID=$!
wait_tcp 127.0.0.1 "$IPERF_PORT" 10
for i in $(seq 1 "$RUNS"); do
	iperf3 -c 127.0.0.1 -p "$IPERF_PORT" -t 3 -J >"$RES/iperf-$i.json"
done
stop_pid "$IPERF_PID"

# ---------------------------------------------------------------- servers
SERVER_PID=""
TARGET_ARGS=()

start_sluice() {
	local dir=$WORK/sluice kafka http
	rm -rf "$dir" && mkdir -p "$dir"
	kafka=$(free_port) http=$(free_port)
	"$SLUICED" --data-dir "$dir/data" --kafka-listen "127.0.0.1:$kafka" --http-listen "127.0.0.1:$http" \
		--inter-broker-listen "127.0.0.1:$(free_port)" \
		--etcd-listen-client "127.0.0.1:$(free_port)" --etcd-listen-peer "127.0.0.1:$(free_port)" \
		--log-level warn >"$dir/sluiced.log" 2>&1 &
	SERVER_PID=$!
	PIDS+=("$SERVER_PID")
	local deadline=$(( $(date +%s) + 60 ))
	until curl -sf "http://127.0.0.1:$http/readyz" >/dev/null; do
		kill -0 "$SERVER_PID" 2>/dev/null || { tail -40 "$dir/sluiced.log" >&2; return 1; }
		[ "$(date +%s)" -lt "$deadline" ] || { log "sluiced not ready"; return 1; }
		sleep 0.1
	done
	TARGET_ARGS=(--system kafka --brokers "127.0.0.1:$kafka" --label "acks=all, fsync per group commit")
	echo "bin/sluiced --data-dir DIR --kafka-listen 127.0.0.1:$kafka --http-listen 127.0.0.1:$http --inter-broker-listen 127.0.0.1:P5 --etcd-listen-client 127.0.0.1:P3 --etcd-listen-peer 127.0.0.1:P4" >"$RES/server-sluice.txt"
}

start_nats() { # sync policy: default | always
	local dir=$WORK/nats-$1 port
	rm -rf "$dir" && mkdir -p "$dir/store"
	port=$(free_port)
	{
		echo "listen: 127.0.0.1:$port"
		echo "max_payload: 8MB"
		echo "jetstream {"
		echo "  store_dir: \"$dir/store\""
		[ "$1" = always ] && echo "  sync_interval: always"
		echo "}"
	} >"$dir/nats.conf"
	nats-server -c "$dir/nats.conf" >"$dir/nats.log" 2>&1 &
	SERVER_PID=$!
	PIDS+=("$SERVER_PID")
	wait_tcp 127.0.0.1 "$port" 30
	local label="JetStream file R1, sync default (fsync every 2 min)"
	[ "$1" = always ] && label="JetStream file R1, sync_interval: always"
	TARGET_ARGS=(--system jetstream --nats-url "nats://127.0.0.1:$port" --label "$label")
	{ echo "nats-server -c nats.conf   # $(nats-server --version 2>&1 | head -1), nats.conf:"; sed -e 's/^/    /' -e "s#$WORK#TMPDIR#" "$dir/nats.conf"; } >"$RES/server-js-$1.txt"
}

stop_server() { [ -n "$SERVER_PID" ] && stop_pid "$SERVER_PID"; SERVER_PID=""; }

# run NAME I [loadgen flags...]: one loadgen run, JSON into $RES/$SYS-$NAME-$I.json
run() {
	local name=$1 i=$2
	shift 2
	local out="$RES/$SYS-$name-$i.json"
	local cmd=("$LOADGEN" "${TARGET_ARGS[@]}" --json --quiet --log-level error
		--partitions "$PARTITIONS" --producers "$PRODUCERS" --consumers "$CONSUMERS" "$@")
	{ printf 'bin/loadgen'; printf ' %q' "${cmd[@]:1}"; echo; } | sed -E 's#127\.0\.0\.1:[0-9]+#127.0.0.1:PORT#g' >"$RES/cmd-$SYS-$name.txt"
	if ! "${cmd[@]}" >"$out" 2>"$RES/$SYS-$name-$i.err"; then
		log "  $SYS $name run $i failed: $(tail -1 "$RES/$SYS-$name-$i.err")"
		rm -f "$out"
		return 1
	fi
}

median_rate() { # name: median produced msgs/s of the runs
	jq -s '[.[].produced.msgs_per_sec] | sort | .[(length-1)/2|floor]' "$RES/$SYS"-"$1"-*.json
}

suite() {
	local i r50 r90 peak prefill
	log "$SYS: peak throughput (as fast as possible, ${DUR})"
	for i in $(seq 1 "$RUNS"); do run max "$i" --scenario steady --rate 0 --duration "$DUR" || true; done
	peak=$(median_rate max)
	r50=$(jq -n "$peak * 0.5 | floor")
	r90=$(jq -n "$peak * 0.9 | floor")
	log "$SYS: peak $peak msgs/s; latency at 50% ($r50/s) and 90% ($r90/s)"
	for i in $(seq 1 "$RUNS"); do run rate50 "$i" --scenario steady --rate "$r50" --duration "$DUR" || true; done
	for i in $(seq 1 "$RUNS"); do run rate90 "$i" --scenario steady --rate "$r90" --duration "$DUR" || true; done
	log "$SYS: latency at the common rate ($COMMON/s)"
	for i in $(seq 1 "$RUNS"); do run common "$i" --scenario steady --rate "$COMMON" --duration "$DUR" || true; done
	log "$SYS: peak scenario (steady $r50/s, 3x for 3s, drain)"
	for i in $(seq 1 "$RUNS"); do
		run peak "$i" --scenario peak --rate "$r50" --duration 3s --peak-duration 3s --drain-timeout "$DRAIN" || true
	done
	log "$SYS: hot-key, large-payloads, replay, consumer-crash (${SHORT})"
	for i in $(seq 1 "$RUNS"); do run hot-key "$i" --scenario hot-key --rate "$r50" --duration "$SHORT" || true; done
	for i in $(seq 1 "$RUNS"); do run large-payloads "$i" --scenario large-payloads --rate 0 --in-flight 500 --duration "$SHORT" || true; done
	prefill=$(jq -n "[200000, $peak * 5] | min | floor") # about 5 s of writing at the peak rate
	for i in $(seq 1 "$RUNS"); do run replay "$i" --scenario replay --prefill "$prefill" || true; done
	for i in $(seq 1 "$RUNS"); do
		run consumer-crash "$i" --scenario consumer-crash --consumers 3 --rate 2000 --duration 5s --crash-after 1500ms \
			--consumer-mode group --commit-interval 5s --session-timeout 6s || break
	done
}

for SYS in $SYSTEMS; do
	case $SYS in
	sluice) start_sluice ;;
	js-default) start_nats default ;;
	js-always) start_nats always ;;
	*) log "unknown system $SYS"; exit 2 ;;
	esac
	suite
	stop_server
done

# ---------------------------------------------------------------- report
log "writing $OUT"
{
	echo "nproc=$(nproc)"
	echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
	echo "memory=$(free -h | awk '/^Mem:/ {print $2}')"
	echo "kernel=$(uname -sr)"
	echo "disk=$(df -h "$WORK" | awk 'NR==2 {print $1" ("$2", fs "$(NF)")"}') $(findmnt -n -o FSTYPE --target "$WORK" 2>/dev/null || true)"
	echo "go=$(go version | awk '{print $3}')"
	echo "nats=$(nats-server --version 2>&1 | head -1)"
	echo "fio=$(fio --version)"
	echo "iperf3=$(iperf3 --version | head -1)"
	echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "elapsed=$(( $(date +%s) - STARTED ))"
	echo "drain=$DRAIN"
	echo "common=$COMMON"
	echo "runs=$RUNS duration=$DUR short=$SHORT drain_timeout=$DRAIN producers=$PRODUCERS consumers=$CONSUMERS partitions=$PARTITIONS"
} >"$RES/machine.txt"
python3 - "$RES" "$OUT" <<'PY'
import glob, json, os, re, statistics, sys

res, out = sys.argv[1], sys.argv[2]
machine = dict(l.rstrip("\n").split("=", 1) for l in open(os.path.join(res, "machine.txt")) if "=" in l)
SYS = [("sluice", "Sluice"), ("js-default", "JetStream (default sync)"), ("js-always", "JetStream (sync always)")]

def runs(sys_, name):
    out = []
    for p in sorted(glob.glob(os.path.join(res, f"{sys_}-{name}-*.json"))):
        try:
            out.append(json.load(open(p)))
        except ValueError:
            pass
    return out

def get(r, path):
    for k in path.split("."):
        if r is None:
            return None
        r = r.get(k)
    return r

def stat(sys_, name, path):
    vals = [v for v in (get(r, path) for r in runs(sys_, name)) if isinstance(v, (int, float))]
    if not vals:
        return None
    return statistics.median(vals), min(vals), max(vals), len(vals)

def drain(sys_):
    vals = [r["peak"]["drain_seconds"] for r in runs(sys_, "peak") if (r.get("peak") or {}).get("drained")]
    return (statistics.median(vals), min(vals), max(vals), len(vals)) if vals else None

def fmt(s, nd=1):
    if s is None:
        return "n/a"
    m, lo, hi, n = s
    f = lambda v: f"{v:,.{nd}f}"
    return f"**{f(m)}** ({f(lo)}–{f(hi)})"

def ratio(a, b, nd=2):
    if a is None or b is None or b[0] == 0:
        return "n/a"
    return f"{a[0]/b[0]:.{nd}f}×"

def fio_bw(bs):
    vals = []
    for p in glob.glob(os.path.join(res, f"fio-{bs}-*.json")):
        try:
            vals.append(json.load(open(p))["jobs"][0]["write"]["bw_bytes"] / 1e6)
        except (ValueError, KeyError, IndexError):
            pass
    return (statistics.median(vals), min(vals), max(vals), len(vals)) if vals else None

def iperf():
    vals = []
    for p in glob.glob(os.path.join(res, "iperf-*.json")):
        try:
            vals.append(json.load(open(p))["end"]["sum_received"]["bits_per_second"] / 8e6)
        except (ValueError, KeyError):
            pass
    return (statistics.median(vals), min(vals), max(vals), len(vals)) if vals else None

def read(name):
    p = os.path.join(res, name)
    return open(p).read().strip() if os.path.exists(p) else None

present = [(k, n) for k, n in SYS if runs(k, "max")]
L = []
w = L.append
w("# Sluice benchmarks\n")
w(f"Generated by `scripts/bench.sh` on {machine.get('date')} at commit `{machine.get('commit')}`; "
  f"the whole run took {int(machine.get('elapsed', 0))//60} min {int(machine.get('elapsed', 0))%60} s. "
  "Every figure is the **median** of the runs, with (min–max); the number of runs is in the settings line. "
  "MB = 10⁶ bytes. Latencies in milliseconds.\n")
w("## Machine\n")
w("| | |\n|---|---|")
for k, label in [("nproc", "cores (nproc)"), ("cpu", "CPU"), ("memory", "memory"), ("kernel", "kernel"),
                 ("disk", "disk (benchmark temp dir)"), ("go", "Go"), ("nats", "nats-server"), ("fio", "fio"), ("iperf3", "iperf3")]:
    w(f"| {label} | {machine.get(k, '')} |")
w(f"\nSettings: {machine.get('runs')}. Loadgen and the server under test share the machine's cores.\n")

w("## Machine limits (measured in the same run)\n")
f64, f1m, ip = fio_bw("64k"), fio_bw("1m"), iperf()
w("| limit | MB/s |\n|---|---|")
w(f"| fsynced sequential append, 64 KiB writes (fio, fsync after every write) | {fmt(f64)} |")
w(f"| fsynced sequential append, 1 MiB writes (fio, fsync after every write) | {fmt(f1m)} |")
w(f"| loopback TCP, one stream (iperf3 on 127.0.0.1) | {fmt(ip)} |\n")

w("## Throughput (as fast as possible, 1 KiB records)\n")
w("Open-loop rate 0: each producer keeps its in-flight budget (10,000 records) full; consumers read concurrently.\n")
w("| system | produced msgs/s | produced MB/s | consumed msgs/s | ack p50 | ack p99 | errors |\n|---|---|---|---|---|---|---|")
for k, n in present:
    errs = sum(sum((r.get("errors") or {}).values()) for r in runs(k, "max"))
    w(f"| {n} | {fmt(stat(k,'max','produced.msgs_per_sec'),0)} | {fmt(stat(k,'max','produced.mb_per_sec'))} | "
      f"{fmt(stat(k,'max','consumed.msgs_per_sec'),0)} | {fmt(stat(k,'max','ack_latency.p50_ms'),2)} | "
      f"{fmt(stat(k,'max','ack_latency.p99_ms'),2)} | {errs} |")
w("")

w("## Publish-acknowledgment latency at 50% and 90% of each system's measured peak\n")
w("Open loop: send times are fixed by the rate and latency counts from the scheduled send time, so a stall "
  "is charged to every record it delays (no coordinated omission).\n")
w("| system | load | rate (msgs/s) | p50 | p99 | p99.9 | max |\n|---|---|---|---|---|---|---|")
for k, n in present:
    for name, label in [("rate50", "50%"), ("rate90", "90%")]:
        w(f"| {n} | {label} | {fmt(stat(k,name,'target_rate'),0)} | {fmt(stat(k,name,'ack_latency.p50_ms'),2)} | "
          f"{fmt(stat(k,name,'ack_latency.p99_ms'),2)} | {fmt(stat(k,name,'ack_latency.p999_ms'),2)} | {fmt(stat(k,name,'ack_latency.max_ms'),2)} |")
w("")

w(f"## Latency at the same offered load ({int(machine.get('common', 0)):,} msgs/s on every system)\n")
w("| system | ack p50 | ack p99 | ack p99.9 | e2e p50 | e2e p99 | e2e p99.9 |\n|---|---|---|---|---|---|---|")
for k, n in present:
    w(f"| {n} | {fmt(stat(k,'common','ack_latency.p50_ms'),2)} | {fmt(stat(k,'common','ack_latency.p99_ms'),2)} | "
      f"{fmt(stat(k,'common','ack_latency.p999_ms'),2)} | {fmt(stat(k,'common','e2e_latency.p50_ms'),2)} | "
      f"{fmt(stat(k,'common','e2e_latency.p99_ms'),2)} | {fmt(stat(k,'common','e2e_latency.p999_ms'),2)} |")
w("")

w("## End-to-end latency at 50% and 90% of each system's peak (producer's scheduled send time → consumer receive)\n")
w("| system | load | p50 | p99 | p99.9 | max |\n|---|---|---|---|---|---|")
for k, n in present:
    for name, label in [("rate50", "50%"), ("rate90", "90%")]:
        w(f"| {n} | {label} | {fmt(stat(k,name,'e2e_latency.p50_ms'),2)} | {fmt(stat(k,name,'e2e_latency.p99_ms'),2)} | "
          f"{fmt(stat(k,name,'e2e_latency.p999_ms'),2)} | {fmt(stat(k,name,'e2e_latency.max_ms'),2)} |")
w("")

w("## Peak: 3× the 50% rate for 3 s, then back to the 50% rate\n")
w("Drain time: end of the peak until the backlog (records the open-loop schedule asked for and consumers have not yet read, "
  "including sends a stalled producer has not made) is back to twice its steady level; median over the runs that drained.\n")
w("| system | steady → peak (msgs/s) | max backlog (records) | drain time (s) | drained | ack p99 over the run |\n|---|---|---|---|---|---|")
for k, n in present:
    rs = runs(k, "peak")
    drained = f"{sum(1 for r in rs if (r.get('peak') or {}).get('drained'))}/{len(rs)}"
    w(f"| {n} | {fmt(stat(k,'peak','peak.steady_rate'),0)} → {fmt(stat(k,'peak','peak.peak_rate'),0)} | "
      f"{fmt(stat(k,'peak','peak.max_backlog'),0)} | {fmt(drain(k),2) if drain(k) else 'not drained within ' + machine.get('drain', '?')} | {drained} | "
      f"{fmt(stat(k,'peak','ack_latency.p99_ms'),2)} |")
w("")

w("## Other scenarios\n")
w("| system | scenario | figure | value |\n|---|---|---|---|")
for k, n in present:
    w(f"| {n} | hot-key (Zipf s=1.5 over 1000 keys, 50% rate) | ack p99 / e2e p99 (ms) | "
      f"{fmt(stat(k,'hot-key','ack_latency.p99_ms'),2)} / {fmt(stat(k,'hot-key','e2e_latency.p99_ms'),2)} |")
    w(f"| {n} | large-payloads (64–256 KiB, as fast as possible) | produced MB/s / ack p99 (ms) | "
      f"{fmt(stat(k,'large-payloads','produced.mb_per_sec'))} / {fmt(stat(k,'large-payloads','ack_latency.p99_ms'),2)} |")
    w(f"| {n} | replay (1 KiB records, min(200,000, 5 s at peak rate), from earliest) | read msgs/s / MB/s | "
      f"{fmt(stat(k,'replay','replay.read_msgs_per_sec'),0)} / {fmt(stat(k,'replay','replay.read_mb_per_sec'))} |")
    if runs(k, "consumer-crash"):
        w(f"| {n} | consumer-crash (3 members at 2,000 msgs/s, one killed at 1.5 s; session timeout / AckWait 6 s, auto-commit every 5 s) | pause (s) / replayed records | "
          f"{fmt(stat(k,'consumer-crash','crash.pause_seconds'),2)} / {fmt(stat(k,'consumer-crash','crash.replayed'),0)} |")
    else:
        err = read(f"{k}-consumer-crash-1.err") or ""
        why = "not run"
        if "does not support consumer groups" in err:
            why = "not run: the broker does not serve consumer groups yet (no JoinGroup in ApiVersions)"
        elif err:
            why = "failed: " + err.splitlines()[-1][:160]
        w(f"| {n} | consumer-crash | | {why} |")
modes = {r.get("consumer_mode") for k, _ in present for r in runs(k, "max")}
w(f"\nConsumer mode of the main runs: {', '.join(sorted(m for m in modes if m))} "
  "(`assign` = direct partition consumption, used while the broker has no consumer groups; JetStream uses one shared durable pull consumer).\n")

w("Notes on reading these:\n")
w("- *As fast as possible* keeps every producer's in-flight budget full, so its ack latency is mostly queueing "
  "(Little's law: in-flight ÷ throughput); the 50%/90% rows are the latency figures to compare.")
w("- *consumer-crash*: on a Kafka-protocol broker the killed member neither leaves nor commits; its partitions "
  "stop until the session timeout expires and the group rebalances, and the survivors re-read from the last "
  "auto-commit (replayed records). JetStream has no partition ownership: the survivors keep pulling from the "
  "shared durable consumer and only the killed member's unacknowledged messages come back after AckWait, so "
  "pause and replays are near zero by design (loadgen acknowledges each message right after processing it).")
w("- Sluice runs with acks=all and fsyncs every group commit before acknowledging; JetStream *default* "
  "acknowledges before fsync (it syncs every 2 minutes), JetStream *sync always* fsyncs every write. "
  "Only Sluice and JetStream *sync always* are durable against power loss at acknowledgment time.\n")
w("## Ratios\n")
s = "sluice"
if any(k == s for k, _ in present):
    w("| ratio | value |\n|---|---|")
    for k, n in present:
        if k == s:
            continue
        w(f"| Sluice / {n}: peak produced msgs/s | {ratio(stat(s,'max','produced.msgs_per_sec'), stat(k,'max','produced.msgs_per_sec'))} |")
        for name, label in [("rate50", "50%"), ("rate90", "90%")]:
            w(f"| Sluice / {n}: ack p99 at {label} of own peak (lower is better) | {ratio(stat(s,name,'ack_latency.p99_ms'), stat(k,name,'ack_latency.p99_ms'))} |")
        w(f"| Sluice / {n}: ack p99 at the same {int(machine.get('common', 0)):,} msgs/s (lower is better) | {ratio(stat(s,'common','ack_latency.p99_ms'), stat(k,'common','ack_latency.p99_ms'))} |")
        w(f"| Sluice / {n}: e2e p99 at the same {int(machine.get('common', 0)):,} msgs/s (lower is better) | {ratio(stat(s,'common','e2e_latency.p99_ms'), stat(k,'common','e2e_latency.p99_ms'))} |")
        w(f"| Sluice / {n}: e2e p99 at 50% of own peak (lower is better) | {ratio(stat(s,'rate50','e2e_latency.p99_ms'), stat(k,'rate50','e2e_latency.p99_ms'))} |")
        w(f"| Sluice / {n}: drain time after the peak (lower is better) | {ratio(drain(s), drain(k))} |")
    smb = stat(s, "max", "produced.mb_per_sec")
    lmb = stat(s, "large-payloads", "produced.mb_per_sec")
    w(f"| Sluice peak MB/s (1 KiB) / fsynced 64 KiB append bandwidth | {ratio(smb, f64)} |")
    w(f"| Sluice peak MB/s (1 KiB) / fsynced 1 MiB append bandwidth | {ratio(smb, f1m)} |")
    w(f"| Sluice large-payload MB/s / fsynced 1 MiB append bandwidth | {ratio(lmb, f1m)} |")
    w(f"| Sluice peak MB/s (1 KiB) / loopback bandwidth | {ratio(smb, ip, 3)} |")
    w("\nThe fio figures fsync after every write, one writer; a broker's group commit covers many records per fsync, "
      "so its MB/s can approach or pass the 64 KiB figure when batches are larger than 64 KiB.\n")

w("## Exact commands\n")
w("Servers (ports are free ports picked per run; data in a temp dir removed at the end):\n")
w("```")
for k, _ in SYS:
    t = read(f"server-{k}.txt")
    if t:
        w(re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", t))
w("fio --name=seq --rw=write --bs=64k --size=256m --fsync=1 --ioengine=psync --directory=TMPDIR --output-format=json")
w("fio --name=seq --rw=write --bs=1m  --size=256m --fsync=1 --ioengine=psync --directory=TMPDIR --output-format=json")
w("iperf3 -s -B 127.0.0.1 -p PORT   &&   iperf3 -c 127.0.0.1 -p PORT -t 3 -J")
w("```\n")
w("Load (one line per test; the `--rate` of the 50%/90%/peak/hot-key runs is computed from that system's measured peak):\n")
w("```")
for p in sorted(glob.glob(os.path.join(res, "cmd-*.txt"))):
    w(open(p).read().strip())
w("```\n")
gb = read("go-bench.txt")
if gb is not None:
    w("## Go micro-benchmarks (`go test -run '^$' -bench . -skip TieredReplay -benchtime 2s ./wal/ ./broker/`; the tiering replay is `make bench-tier`)\n")
    w("```")
    w("\n".join(l for l in gb.splitlines() if l.startswith(("Benchmark", "ok", "FAIL", "PASS", "---", "#")) or "FAILED" in l or "error" in l.lower()))
    w("```\n")
prof = os.path.join(os.path.dirname(os.path.abspath(out)), "docs", "profiling.md")
if os.path.exists(prof):
    w(open(prof).read().strip() + "\n")
# The journal against per-partition fsync: measured by scripts/durability-bench.sh
# (its own run, kept in docs/durability.md) and carried here.
dur = os.path.join(os.path.dirname(os.path.abspath(out)), "docs", "durability.md")
if os.path.exists(dur):
    t = open(dur).read()
    i = t.find("## Measured effect")
    if i >= 0:
        w("## Durability: the broker journal against per-partition fsync (from docs/durability.md)\n")
        w("Written by `scripts/durability-bench.sh`, a separate run (about 12 minutes); the design and the "
          "alternatives measured with `go run ./scripts/fsynccandidates` are in docs/durability.md. "
          "\"per-partition\" is the same build run with `--per-partition-fsync`.\n")
        w(t[i + len("## Measured effect"):].strip().replace("\n#### ", "\n### ") + "\n")
open(out, "w").write("\n".join(L) + "\n")
PY
log "done: $OUT"
