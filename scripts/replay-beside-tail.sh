#!/usr/bin/env bash
# scripts/replay-beside-tail.sh LAYOUT [RUNS] — TestQuotaTieredReplayBesideTail
# (20 s windows) with its processes held to chosen cores, RUNS times
# (default 2), printing each run's tail latencies alone and beside the
# replay (BENCHMARKS.md, "Where the tail's wait beside a replay comes from").
#
# LAYOUT, on a machine with at least two cores:
#   free      no pinning: the kernel places every process;
#   shared    the broker and the test (the tail's producer and reader) on
#             core 0; the S3 server and the replaying client on core 1;
#   own-core  the broker alone on core 0; the test, the S3 server and the
#             replaying client on core 1.
# The environment passes through: SLUICE_REPLAY_RATE=B gives the replay
# tenant a consumer_byte_rate, SLUICE_REPLAY_TRACE=F writes the broker's
# execution traces (see the test's comment). The broker and the test are
# built into a temporary directory from this checkout.
set -euo pipefail
LAYOUT=${1:?usage: replay-beside-tail.sh free|shared|own-core [RUNS]}
RUNS=${2:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/sluice-replaybench.XXXXXX")
PINNER=
trap 'if [ -n "$PINNER" ]; then kill $PINNER 2>/dev/null || true; fi; rm -rf "$W"' EXIT
cd "$ROOT"
go build -o "$W/sluiced" ./cmd/sluiced
go test -c -o "$W/e2e.test" ./e2e/
make -s tools >/dev/null

# pin PATTERN CORE: every thread of every process whose command line
# matches PATTERN onto CORE, every 0.3 s (processes the test starts
# inherit the test's cores until then).
pin() {
	while true; do
		for p in $(pgrep -f "$1" || true); do taskset -apc "$2" "$p" >/dev/null 2>&1 || true; done
		sleep 0.3
	done
}
case $LAYOUT in
free) TEST=() ;;
shared)
	TEST=(taskset -c 0)
	pin 'versitygw|TestReplayConsumerHelper' 1 &
	PINNER=$!
	;;
own-core)
	TEST=(taskset -c 1)
	pin "^$W/sluiced" 0 &
	PINNER=$!
	;;
*)
	echo "unknown layout $LAYOUT" >&2
	exit 2
	;;
esac
for i in $(seq 1 "$RUNS"); do
	echo "== $LAYOUT run $i ($(date -u +%H:%M:%S) UTC) rate ${SLUICE_REPLAY_RATE:-unlimited}"
	SLUICE_E2E_SLUICED="$W/sluiced" SLUICE_QUOTA_E2E=1 "${TEST[@]}" "$W/e2e.test" -test.count=1 -test.v \
		-test.run 'TestQuotaTieredReplayBesideTail$' >"$W/run.log" 2>&1 || true
	grep -E 'tail alone|tail beside|replay while|beside / alone|^(--- )?(PASS|FAIL|ok)' "$W/run.log" | sed 's/^ *//'
done
