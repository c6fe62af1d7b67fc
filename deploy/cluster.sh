#!/usr/bin/env bash
# deploy/cluster.sh start|stop [DIR] — a three-broker Sluice cluster on
# loopback, one broker per availability zone (a, b, c). The brokers' embedded
# etcd members form one etcd cluster. Each broker keeps its data, log and pid
# in DIR/nN (default: data/cluster). `make cluster` and `make cluster-stop`
# call it.
#
# The brokers share one bucket: Versity's S3 gateway (bin/versitygw, which
# `make tools` installs) serves DIR/s3 on S3_PORT (default 19000), bucket
# "sluice", with the credentials in S3_ACCESS_KEY / S3_SECRET_KEY. Set
# OBJECT_STORE to use another store (any --object-store URL) instead.
#
# Ports (node n = 1, 2, 3): Kafka 1909n, HTTP 1808n, inter-broker 1919n
# (replica fetches and election messages; never given to clients), etcd
# client 2379+10(n-1), etcd peer 2380+10(n-1). Override the bases with
# KAFKA_BASE, HTTP_BASE, INTER_BROKER_BASE and ETCD_BASE. Extra sluiced flags
# for every broker go in SLUICED_ARGS.
set -euo pipefail

cmd=${1:-start}
dir=${2:-data/cluster}
bin=${SLUICED:-bin/sluiced}
kbase=${KAFKA_BASE:-19090}
hbase=${HTTP_BASE:-18080}
ibase=${INTER_BROKER_BASE:-19190}
ebase=${ETCD_BASE:-2379}
azs=(a b c)
s3port=${S3_PORT:-19000}
s3bin=${VERSITYGW:-bin/versitygw}
export AWS_ACCESS_KEY_ID=${S3_ACCESS_KEY:-sluice}
export AWS_SECRET_ACCESS_KEY=${S3_SECRET_KEY:-sluice-local-secret}
export AWS_REGION=us-east-1

kafka() { echo "127.0.0.1:$((kbase + $1))"; }
http() { echo "127.0.0.1:$((hbase + $1))"; }
inter_broker() { echo "127.0.0.1:$((ibase + $1))"; }
etcd_client() { echo "127.0.0.1:$((ebase + 10 * ($1 - 1)))"; }
etcd_peer() { echo "127.0.0.1:$((ebase + 1 + 10 * ($1 - 1)))"; }

# start_s3 runs the shared object store unless OBJECT_STORE names another.
start_s3() {
	if [[ -n ${OBJECT_STORE:-} ]]; then
		return
	fi
	mkdir -p "$dir/s3/root/sluice"
	if [[ -f $dir/s3/pid ]] && kill -0 "$(cat "$dir/s3/pid")" 2>/dev/null; then
		echo "the S3 server is already running (pid $(cat "$dir/s3/pid")); run '$0 stop' first" >&2
		exit 1
	fi
	"$s3bin" --access "$AWS_ACCESS_KEY_ID" --secret "$AWS_SECRET_ACCESS_KEY" --region us-east-1 \
		--port "127.0.0.1:$s3port" --quiet posix "$dir/s3/root" >"$dir/s3/versitygw.log" 2>&1 &
	echo $! >"$dir/s3/pid"
	for i in $(seq 1 100); do
		curl -s -o /dev/null "http://127.0.0.1:$s3port/" && break
		if [[ $i == 100 ]]; then
			echo "the S3 server did not start; see $dir/s3/versitygw.log" >&2
			exit 1
		fi
		sleep 0.1
	done
	OBJECT_STORE="s3://sluice/cluster?endpoint=http://127.0.0.1:$s3port&region=us-east-1"
}

start() {
	local initial="" n pid
	for n in 1 2 3; do
		initial+="${initial:+,}$n=http://$(etcd_peer $n)"
	done
	start_s3
	for n in 1 2 3; do
		mkdir -p "$dir/n$n"
		if [[ -f $dir/n$n/pid ]] && kill -0 "$(cat "$dir/n$n/pid")" 2>/dev/null; then
			echo "node $n is already running (pid $(cat "$dir/n$n/pid")); run '$0 stop' first" >&2
			exit 1
		fi
		"$bin" --node-id "$n" --az "${azs[$((n - 1))]}" --data-dir "$dir/n$n/data" \
			--kafka-listen "$(kafka $n)" --http-listen "$(http $n)" --inter-broker-listen "$(inter_broker $n)" \
			--etcd-listen-client "$(etcd_client $n)" --etcd-listen-peer "$(etcd_peer $n)" \
			--etcd-initial-cluster "$initial" --object-store "$OBJECT_STORE" \
			${SLUICED_ARGS:-} >"$dir/n$n/sluiced.log" 2>&1 &
		echo $! >"$dir/n$n/pid"
	done
	for n in 1 2 3; do
		pid=$(cat "$dir/n$n/pid")
		for i in $(seq 1 240); do
			curl -sf "$(http $n)/readyz" >/dev/null && break
			if ! kill -0 "$pid" 2>/dev/null; then
				echo "node $n exited; its log ($dir/n$n/sluiced.log) ends:" >&2
				tail -n 20 "$dir/n$n/sluiced.log" >&2
				stop
				exit 1
			fi
			if [[ $i == 240 ]]; then
				echo "node $n not ready after 120 s; see $dir/n$n/sluiced.log" >&2
				stop
				exit 1
			fi
			sleep 0.5
		done
	done
	echo "three brokers ready (AZs a, b, c); logs in $dir/n*/sluiced.log"
	echo "bootstrap servers: $(kafka 1),$(kafka 2),$(kafka 3)"
	echo "HTTP APIs:         http://$(http 1) http://$(http 2) http://$(http 3)"
	echo "object store:      $OBJECT_STORE"
}

stop() {
	local n pid
	for n in 1 2 3; do
		[[ -f $dir/n$n/pid ]] || continue
		pid=$(cat "$dir/n$n/pid")
		kill -TERM "$pid" 2>/dev/null || true
	done
	for n in 1 2 3; do
		[[ -f $dir/n$n/pid ]] || continue
		pid=$(cat "$dir/n$n/pid")
		for _ in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "node $n (pid $pid) did not stop in 10 s; killing it" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
		rm -f "$dir/n$n/pid"
	done
	if [[ -f $dir/s3/pid ]]; then
		kill -TERM "$(cat "$dir/s3/pid")" 2>/dev/null || true
		rm -f "$dir/s3/pid"
	fi
}

case $cmd in
start) start ;;
stop) stop ;;
*)
	echo "usage: $0 start|stop [DIR]" >&2
	exit 2
	;;
esac
