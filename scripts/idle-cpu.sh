#!/usr/bin/env bash
# scripts/idle-cpu.sh BIN NAME [SLUICED ARGS...] — one fresh sluiced from
# BIN (one broker, embedded etcd, on free 127.0.0.1 ports), 5 s after
# /readyz, then its CPU (utime+stime, /proc/PID/stat) over IDLE seconds
# (default 20) with no load: prints "NAME cpu_ms_per_s=... load=...".
# PROF=1 takes a CPU profile of the same window into NAME.pprof
# (/debug/pprof/profile). Used to compare the canary's cost between
# builds and intervals (BENCHMARKS.md, issue 23), arms alternated by hand.
set -euo pipefail
BIN=$1 NAME=$2
shift 2
IDLE=${IDLE:-20}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/scripts/broker.sh"
D=$(mktemp -d "${TMPDIR:-/tmp}/sluice-idlecpu.XXXXXX")
K=$(free_port) H=$(free_port) c=$(free_port) p=$(free_port)
"$BIN" --data-dir "$D/data" --kafka-listen 127.0.0.1:$K --http-listen 127.0.0.1:$H --inter-broker-listen 127.0.0.1:$(free_port) \
	--etcd-listen-client 127.0.0.1:$c --etcd-listen-peer 127.0.0.1:$p --log-level warn "$@" >"$D/broker.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$D"' EXIT
for _ in $(seq 1 120); do curl -sf 127.0.0.1:$H/readyz >/dev/null && break; sleep 0.5; done
sleep 5
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)
i0=$(cpu $PID)
if [ "${PROF:-0}" = 1 ]; then curl -s -o "$NAME.pprof" "127.0.0.1:$H/debug/pprof/profile?seconds=$IDLE"; else sleep "$IDLE"; fi
i1=$(cpu $PID)
echo "$NAME cpu_ms_per_s=$(python3 -c "print(($i1 - $i0) * 1000 / $TICK / $IDLE)") load=$(cut -d' ' -f1 /proc/loadavg)"
