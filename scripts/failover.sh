#!/usr/bin/env bash
# scripts/failover.sh — failover times of the three-broker loopback cluster
# (deploy/cluster.sh, default leases): RUNS times (default 3) each, on a
# fresh cluster, kill -9 a partition leader that is not the controller, and
# the controller (which also leads partitions), each once with etcd's
# leadership moved away from the victim first and once with it moved to the
# victim (a broker that dies with etcd's leadership costs an etcd election,
# after which every lease gets a fresh TTL), and print how long every
# survivor's Metadata took to name new leaders for all six partitions of an
# RF-3 topic, and to drop the killed broker from every in-sync set
# (scripts/failover/main.go). The README's failover figures come from it.
# Ports: KAFKA_BASE (default 26090, below the ephemeral range) and the other deploy/cluster.sh bases
# below; SLUICED (default bin/sluiced) is the broker binary.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${RUNS:-3}
export SLUICED=${SLUICED:-$ROOT/bin/sluiced}
export KAFKA_BASE=${KAFKA_BASE:-26090} HTTP_BASE=${HTTP_BASE:-26080}
export INTER_BROKER_BASE=${INTER_BROKER_BASE:-26190} ETCD_BASE=${ETCD_BASE:-26379}
export S3_PORT=${S3_PORT:-26500} VERSITYGW=${VERSITYGW:-$ROOT/bin/versitygw}
W=$(mktemp -d "${TMPDIR:-/tmp}/sluice-failover.XXXXXX")
cleanup() {
	"$ROOT/deploy/cluster.sh" stop "$W/cluster" >/dev/null 2>&1 || true
	rm -rf "$W"
}
trap cleanup EXIT
(cd "$ROOT" && go build -o "$W/failover" ./scripts/failover)

for kill in leader controller; do
	for etcd in survivor victim; do
		for _ in $(seq 1 "$RUNS"); do
			rm -rf "$W/cluster"
			"$ROOT/deploy/cluster.sh" start "$W/cluster" >/dev/null
			"$W/failover" -dir "$W/cluster" -kafka-base "$KAFKA_BASE" -etcd-base "$ETCD_BASE" -kill "$kill" -etcd-leader "$etcd"
			"$ROOT/deploy/cluster.sh" stop "$W/cluster" >/dev/null 2>&1 || true
		done
	done
done
