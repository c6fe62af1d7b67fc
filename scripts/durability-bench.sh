#!/usr/bin/env bash
# scripts/durability-bench.sh [SLUICED] — the broker journal against
# per-partition fsyncs (--per-partition-fsync), in one run on this machine:
#   1. fio's fdatasync latency for 4 KiB and 64 KiB appends (the disk's floor);
#   2. ack p50/p99/p999 at 2,000, 20,000 and 60,000 records/s over 8 partitions,
#      with broker CPU per record and fsyncs per second;
#   3. fsyncs per second and ack p99 at 20,000 records/s over 1, 8, 64 and 512
#      partitions;
#   4. peak throughput (as fast as possible) over 8 partitions.
# Each loadgen run is open loop (latency from the intended send time), 1 KiB
# records, acks=all, linger 0, 2 producers and 1 consumer, against a fresh
# broker. Each row is the median of REPS runs (default 3; the p99 column
# also gives the range). Prints Markdown; about 25 minutes on 2 cores with
# the defaults. DUR (default 10s) sets the length of each run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/bin/sluiced}
DUR=${DUR:-10s}
REPS=${REPS:-3}
W=$(mktemp -d "${TMPDIR:-/tmp}/sluice-dur.XXXXXX")
. "$ROOT/scripts/broker.sh"
PID=
trap 'if [ -n "$PID" ]; then kill $PID 2>/dev/null; wait $PID 2>/dev/null; fi; rm -rf "$W"' EXIT
HZ=$(getconf CLK_TCK)

# mode_bin MODE: a launcher for the broker in that mode.
mode_bin() {
	local f="$W/sluiced-$1"
	if [ "$1" = per-partition ]; then
		printf '#!/bin/sh\nexec %q --per-partition-fsync "$@"\n' "$BIN" > "$f"
	else
		printf '#!/bin/sh\nexec %q "$@"\n' "$BIN" > "$f"
	fi
	chmod +x "$f"
	echo "$f"
}

fsyncs() { curl -sf "127.0.0.1:$H/metrics" | awk '/^sluice_wal_fsync_duration_seconds_count/ {print $2}'; }
ticks() { awk '{print $14+$15}' "/proc/$PID/stat"; }

# once MODE RATE PARTITIONS: one loadgen run on a fresh broker; prints
# "p50 p99 p999 fsyncs_per_s cpu_us_per_record records_per_s".
once() {
	local mode=$1 rate=$2 parts=$3 f0 f1 t0 t1
	rm -rf "$W/data"
	start_broker "$(mode_bin "$mode")" "$W"
	f0=$(fsyncs); t0=$(ticks)
	"$ROOT/bin/loadgen" --brokers "127.0.0.1:$K" --scenario steady --rate "$rate" --duration "$DUR" \
		--sizes fixed:1024 --partitions "$parts" --producers 2 --consumers 1 --acks all --linger 0 \
		--quiet --json > "$W/r.json"
	f1=$(fsyncs); t1=$(ticks)
	kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
	python3 - "$W/r.json" "$f0" "$f1" "$t0" "$t1" "$HZ" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
f0, f1, t0, t1, hz = map(float, sys.argv[2:7])
a = r["ack_latency"]
secs = max(r["produce_seconds"], 1e-9)
n = max(r["produced"]["records"], 1)
# fsyncs and CPU include broker start-up and topic creation (well under 1%).
print(f'{a["p50_ms"]} {a["p99_ms"]} {a["p999_ms"]} {(f1-f0)/secs} {(t1-t0)/hz/n*1e6} {r["produced"]["msgs_per_sec"]}')
PY
}

# run MODE RATE PARTITIONS: REPS runs; prints the median of each column,
# then the p99 range: "p50 p99 p999 fsyncs_per_s cpu_us records_per_s p99_range".
run() {
	local i
	for ((i = 0; i < REPS; i++)); do once "$@"; done | python3 -c '
import statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
med = [statistics.median(c) for c in zip(*rows)]
p99 = [r[1] for r in rows]
print(f"{med[0]:.2f} {med[1]:.2f} {med[2]:.2f} {med[3]:.0f} {med[4]:.1f} {med[5]:.0f} {min(p99):.2f}–{max(p99):.2f}")'
}

echo "## Durability: broker journal vs per-partition fsync"
echo
echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(df -T "$W" | awk 'NR==2 {print $2}') on $(df "$W" | awk 'NR==2 {print $1}'); $(date -u +%Y-%m-%d); commit $(git -C "$ROOT" rev-parse --short HEAD). Command: \`scripts/durability-bench.sh\` (medians of $REPS runs of $DUR each; loadgen shares the cores)."
echo

if command -v fio >/dev/null 2>&1; then
	echo "### The disk: fio, sequential appends with fdatasync after each"
	echo
	echo "| block | fdatasync p50 | p99 | p99.9 |"
	echo "|---|---|---|---|"
	for bs in 4k 64k; do
		fio --name=fsync --directory="$W" --rw=write --bs=$bs --size=64m --fdatasync=1 --ioengine=sync \
			--output-format=json > "$W/fio.json" 2>/dev/null
		python3 - "$W/fio.json" "$bs" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["jobs"][0]["sync"]["lat_ns"]["percentile"]
ms = lambda k: p[k] / 1e6
print(f'| {sys.argv[2]} | {ms("50.000000"):.2f} ms | {ms("99.000000"):.2f} ms | {ms("99.900000"):.2f} ms |')
PY
		rm -f "$W"/fsync.*
	done
	echo
else
	echo "(fio not installed: apt-get install fio; the disk's own latency is not shown)"
	echo
fi

echo "### Ack latency over 8 partitions"
echo
echo "| offered records/s | mode | ack p50 | p99 (range) | p99.9 | fsyncs/s | broker CPU per record |"
echo "|---|---|---|---|---|---|---|"
for rate in 2000 20000 60000; do
	for mode in per-partition journal; do
		read -r p50 p99 p999 fps cpu _ range < <(run $mode $rate 8)
		echo "| $rate | $mode | $p50 ms | $p99 ms ($range) | $p999 ms | $fps | $cpu µs |"
	done
done
echo

echo "### fsyncs per second as partitions grow (20,000 records/s)"
echo
echo "| partitions | mode | fsyncs/s | ack p50 | ack p99 (range) |"
echo "|---|---|---|---|---|"
for parts in 1 8 64 512; do
	for mode in per-partition journal; do
		read -r p50 p99 _ fps _ _ range < <(run $mode 20000 $parts)
		echo "| $parts | $mode | $fps | $p50 ms | $p99 ms ($range) |"
	done
done
echo

echo "### Peak throughput over 8 partitions (as fast as possible)"
echo
echo "| mode | records/s | ack p50 | ack p99 |"
echo "|---|---|---|---|"
for mode in per-partition journal; do
	read -r p50 p99 _ _ _ tput _ < <(run $mode 0 8)
	echo "| $mode | $tput | $p50 ms | $p99 ms |"
done
