#!/usr/bin/env bash
# deploy/cluster.sh — a three-broker Sluice cluster on loopback, one broker
# per availability zone (a, b, c). The brokers' embedded etcd members form
# one etcd cluster. `make cluster`, `make cluster-stop`, `make
# cluster-restart` and `make cluster-status` call it.
#
#	deploy/cluster.sh start   [DIR] [N]  start the cluster, or only broker N
#	deploy/cluster.sh stop    [DIR] [N]  stop the cluster, or only broker N
#	deploy/cluster.sh restart [DIR] [N]  stop, then start (broker N, or all)
#	deploy/cluster.sh status  [DIR]      each broker's pid, liveness, AZ, role
#
# DIR defaults to data/cluster; a lone 1, 2 or 3 in its place is N. Broker N
# keeps its data in DIR/nN/data, its pid in DIR/nN/pid and its output in
# DIR/nN/sluiced.log. The log is appended to, never truncated, so what a
# crashed broker said survives its restart; each start first writes a line
# "=== <UTC time> deploy/cluster.sh: broker N starts (pid P)".
#
# Invariant: the script signals a pid only while /proc/<pid>/cmdline shows
# that process is this broker (a sluiced whose --data-dir is DIR/nN/data) or
# this cluster's S3 server (a versitygw serving DIR/s3/root). A pid file
# naming anything else (a stale file whose pid now belongs to another
# process) is reported and removed, and its pid left alone. Hence Linux
# only: it needs /proc.
#
# status prints one line per broker: its pid, whether the process runs,
# /healthz and /readyz, its AZ, its role (controller or broker, as the
# cluster's Metadata says; "unlisted" when it is not registered) and how
# many partitions it leads. Role and leaders come from one `kcat -L` against
# the running brokers ("?" without kcat). It exits 0 when all three brokers
# run and are ready, 3 otherwise.
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
# for every broker go in SLUICED_ARGS, the binary in SLUICED (default
# bin/sluiced). Starting the whole cluster records these settings (and
# S3_PORT and OBJECT_STORE) in DIR/cluster.env; later commands on DIR use
# them unless the environment sets them again, so a broker restarts on the
# ports and store it had. The S3 credentials are not recorded: pass them
# again if they are not the defaults.
set -euo pipefail

usage() {
	echo "usage: $0 start|stop|restart [DIR] [N] | status [DIR]   (DIR default data/cluster, N = 1, 2 or 3)" >&2
	exit 2
}

cmd=${1:-start}
[[ $# -gt 0 ]] && shift
dir=data/cluster
node=""
case $# in
0) ;;
1) if [[ $1 =~ ^[123]$ ]]; then node=$1; else dir=$1; fi ;;
2) dir=$1 node=$2 ;;
*) usage ;;
esac
[[ -z $node || $node =~ ^[123]$ ]] || usage
[[ $cmd == status && -n $node ]] && usage
if [[ ! -r /proc/self/cmdline ]]; then
	echo "$0 needs Linux's /proc to tell its brokers' pids from others" >&2
	exit 1
fi
adir=$(realpath -m -- "$dir")

# saved KEY prints the value DIR/cluster.env recorded for KEY, if any.
saved() {
	[[ -f $adir/cluster.env ]] || return 0
	sed -n "s/^$1=//p" "$adir/cluster.env" | tail -n 1
}

setting() { # setting KEY DEFAULT: the environment's, else the recorded, else DEFAULT
	local v=${!1:-}
	[[ -n $v ]] || v=$(saved "$1")
	echo "${v:-$2}"
}

bin=$(setting SLUICED bin/sluiced)
kbase=$(setting KAFKA_BASE 19090)
hbase=$(setting HTTP_BASE 18080)
ibase=$(setting INTER_BROKER_BASE 19190)
ebase=$(setting ETCD_BASE 2379)
s3port=$(setting S3_PORT 19000)
object_store=$(setting OBJECT_STORE "")
sluiced_args=$(setting SLUICED_ARGS "")
# SECURE=1: SASL_SSL listeners and HTTPS with certificates of our own
# (sluicectl certs create), mutual TLS between the brokers, security on,
# the super user admin.
secure=$(setting SECURE "")
ctl=$(setting SLUICECTL bin/sluicectl)
certs=$adir/certs
azs=(a b c)
s3bin=${VERSITYGW:-bin/versitygw}
export AWS_ACCESS_KEY_ID=${S3_ACCESS_KEY:-sluice}
export AWS_SECRET_ACCESS_KEY=${S3_SECRET_KEY:-sluice-local-secret}
export AWS_REGION=us-east-1

kafka() { echo "127.0.0.1:$((kbase + $1))"; }
http() { echo "127.0.0.1:$((hbase + $1))"; }
# hcurl calls a broker's HTTP API, over HTTPS checked against the
# cluster's CA when SECURE=1.
hcurl() {
	local url=$1
	shift
	if [[ $secure == 1 ]]; then
		curl --cacert "$certs/ca.crt" "$@" "https://$url"
	else
		curl "$@" "http://$url"
	fi
}
inter_broker() { echo "127.0.0.1:$((ibase + $1))"; }
etcd_client() { echo "127.0.0.1:$((ebase + 10 * ($1 - 1)))"; }
etcd_peer() { echo "127.0.0.1:$((ebase + 1 + 10 * ($1 - 1)))"; }

# owns PID NAME FLAG PATH succeeds when PID is a live process whose program
# is named NAME (its basename contains it) and whose argument after FLAG
# (or in FLAG=…) is PATH, read relative to the process's working directory.
# A zombie has an empty command line, so it is never owned.
owns() {
	local pid=$1 name=$2 flag=$3 want=$4 cwd arg next="" got=""
	local -a args
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	mapfile -d '' args 2>/dev/null <"/proc/$pid/cmdline" || return 1
	cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null) || return 1
	[[ ${#args[@]} -gt 0 && $(basename -- "${args[0]}") == *"$name"* ]] || return 1
	for arg in "${args[@]:1}"; do
		if [[ -n $next ]]; then
			got=$arg
			break
		fi
		case $arg in
		"$flag") next=1 ;;
		"$flag"=*) got=${arg#*=} && break ;;
		esac
	done
	[[ -n $got ]] || return 1
	[[ $got == /* ]] || got=$cwd/$got
	[[ $(realpath -m -- "$got") == "$want" ]]
}

# broker_pid N [keep] prints broker N's pid when its pid file names a
# running broker N. A pid file naming anything else is stale: it is removed
# (kept with "keep"), and the status is 2 instead of 1.
broker_pid() {
	local f=$adir/n$1/pid pid
	[[ -f $f ]] || return 1
	pid=$(<"$f")
	if owns "$pid" sluiced --data-dir "$adir/n$1/data"; then
		echo "$pid"
		return 0
	fi
	[[ -n ${2:-} ]] && return 2
	echo "node $1: its pid file names pid ${pid:-(none)}, which is not this broker; removing the stale file" >&2
	rm -f "$f"
	return 2
}

s3_pid() {
	local f=$adir/s3/pid pid
	[[ -f $f ]] || return 1
	pid=$(<"$f")
	if owns "$pid" versitygw posix "$adir/s3/root"; then
		echo "$pid"
		return 0
	fi
	echo "S3 server: its pid file names pid ${pid:-(none)}, which is not this cluster's versitygw; removing the stale file" >&2
	rm -f "$f"
	return 1
}

# start_s3 runs the shared object store unless OBJECT_STORE names another,
# or it already runs; either way it sets object_store.
start_s3() {
	[[ -z $object_store ]] || return 0
	object_store="s3://sluice/cluster?endpoint=http://127.0.0.1:$s3port&region=us-east-1"
	s3_pid >/dev/null && return 0
	mkdir -p "$adir/s3/root/sluice"
	"$s3bin" --access "$AWS_ACCESS_KEY_ID" --secret "$AWS_SECRET_ACCESS_KEY" --region us-east-1 \
		--port "127.0.0.1:$s3port" --quiet posix "$adir/s3/root" >>"$adir/s3/versitygw.log" 2>&1 &
	echo $! >"$adir/s3/pid"
	for i in $(seq 1 100); do
		curl -s -o /dev/null "http://127.0.0.1:$s3port/" && break
		if [[ $i == 100 ]]; then
			echo "the S3 server did not start; see $adir/s3/versitygw.log" >&2
			exit 1
		fi
		sleep 0.1
	done
}

# make_secrets makes the cluster's CA, one certificate per broker and the
# super user's password, once: a restart keeps them.
make_secrets() {
	if [[ ! -f $certs/broker-3.crt ]]; then
		"$ctl" certs create --dir "$certs" --brokers broker-1,broker-2,broker-3 --clients admin \
			--hosts localhost,127.0.0.1 >/dev/null
	fi
	if [[ ! -f $adir/admin-password ]]; then
		(umask 077 && head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$adir/admin-password")
	fi
}

# launch N starts broker N in the background, its output appended to its
# log after a line that dates the start and names the pid.
launch() {
	local n=$1 initial="" m
	for m in 1 2 3; do
		initial+="${initial:+,}$m=http://$(etcd_peer $m)"
	done
	mkdir -p "$adir/n$n/data"
	local listen=(--kafka-listen "$(kafka "$n")") security=()
	if [[ $secure == 1 ]]; then
		listen=(--listeners "SASL_SSL://$(kafka "$n")")
		security=(--security --admin-password-file "$adir/admin-password"
			--tls-cert-file "$certs/broker-$n.crt" --tls-key-file "$certs/broker-$n.key" --tls-client-ca-file "$certs/ca.crt"
			--sasl-enabled-mechanisms SCRAM-SHA-256,SCRAM-SHA-512,PLAIN
			--inter-broker-security-protocol SSL --inter-broker-principals User:broker-1,User:broker-2,User:broker-3)
	fi
	# The subshell prints its own pid, then becomes sluiced (exec keeps the
	# pid), so the separator, the pid file and the process agree.
	# shellcheck disable=SC2086 # SLUICED_ARGS is a list of flags
	(
		echo "=== $(date -u +%Y-%m-%dT%H:%M:%SZ) deploy/cluster.sh: broker $n starts (pid $BASHPID)"
		exec "$bin" --node-id "$n" --az "${azs[$((n - 1))]}" --data-dir "$adir/n$n/data" \
			"${listen[@]}" "${security[@]}" --http-listen "$(http "$n")" --inter-broker-listen "$(inter_broker "$n")" \
			--etcd-listen-client "$(etcd_client "$n")" --etcd-listen-peer "$(etcd_peer "$n")" \
			--etcd-initial-cluster "$initial" --object-store "$object_store" $sluiced_args
	) >>"$adir/n$n/sluiced.log" 2>&1 </dev/null &
	local pid=$!
	echo "$pid" >"$adir/n$n/pid"
	# Until the exec, the pid is a copy of this script: wait for it to be
	# the broker (or to be gone), so no check mistakes it for a stale pid.
	for _ in $(seq 1 100); do
		owns "$pid" sluiced --data-dir "$adir/n$n/data" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
}

# await_ready N waits until broker N answers /readyz, or fails when it
# exits or takes more than 120 s.
await_ready() {
	local n=$1 pid i
	pid=$(<"$adir/n$n/pid")
	for i in $(seq 1 240); do
		hcurl "$(http "$n")/readyz" -sf -m 2 >/dev/null && return 0
		if ! owns "$pid" sluiced --data-dir "$adir/n$n/data"; then
			echo "node $n exited; its log ($adir/n$n/sluiced.log) ends:" >&2
			tail -n 20 "$adir/n$n/sluiced.log" >&2
			return 1
		fi
		sleep 0.5
	done
	echo "node $n not ready after 120 s; see $adir/n$n/sluiced.log" >&2
	return 1
}

record_settings() {
	{
		echo "SLUICED=$bin"
		echo "KAFKA_BASE=$kbase"
		echo "HTTP_BASE=$hbase"
		echo "INTER_BROKER_BASE=$ibase"
		echo "ETCD_BASE=$ebase"
		echo "S3_PORT=$s3port"
		echo "OBJECT_STORE=$object_store"
		echo "SLUICED_ARGS=$sluiced_args"
		echo "SECURE=$secure"
	} >"$adir/cluster.env"
}

# start [N]: the whole cluster (refused while any broker runs), or broker N.
start() {
	local nodes=(1 2 3) n pid
	[[ -z ${1:-} ]] || nodes=("$1")
	mkdir -p "$adir"
	for n in "${nodes[@]}"; do
		if pid=$(broker_pid "$n"); then
			echo "node $n is already running (pid $pid); run '$0 stop $dir${1:+ $1}' first" >&2
			exit 1
		fi
	done
	[[ -n ${1:-} ]] || record_settings
	[[ $secure != 1 ]] || make_secrets
	start_s3
	# The etcd members wait for each other's quorum: start all, then wait.
	for n in "${nodes[@]}"; do
		launch "$n"
	done
	for n in "${nodes[@]}"; do
		if ! await_ready "$n"; then
			stop "${1:-}"
			exit 1
		fi
	done
	if [[ -n ${1:-} ]]; then
		echo "node $n ready (pid $(<"$adir/n$n/pid"), AZ ${azs[$((n - 1))]}); log in $adir/n$n/sluiced.log"
		return
	fi
	echo "three brokers ready (AZs a, b, c); logs in $adir/n*/sluiced.log"
	echo "bootstrap servers: $(kafka 1),$(kafka 2),$(kafka 3)"
	if [[ $secure == 1 ]]; then
		echo "HTTP APIs:         https://$(http 1) https://$(http 2) https://$(http 3) (CA $certs/ca.crt)"
		echo "object store:      $object_store"
		echo "super user:        admin, password in $adir/admin-password"
		echo "kcat:              kcat -b $(kafka 1) -X security.protocol=SASL_SSL -X ssl.ca.location=$certs/ca.crt \\"
		echo "                     -X sasl.mechanisms=PLAIN -X sasl.username=admin -X sasl.password=\"\$(cat $adir/admin-password)\" -L"
		echo "                   (or -X sasl.mechanisms=SCRAM-SHA-512, with any librdkafka)"
		echo "sluicectl:         $ctl --server https://$(http 1) --cacert $certs/ca.crt --user admin --password-file $adir/admin-password tenant ls"
		return
	fi
	echo "HTTP APIs:         http://$(http 1) http://$(http 2) http://$(http 3)"
	echo "object store:      $object_store"
}

# stop [N]: the whole cluster and its S3 server, or broker N alone.
stop() {
	local nodes=(1 2 3) n pid
	local -A pids=()
	[[ -z ${1:-} ]] || nodes=("$1")
	for n in "${nodes[@]}"; do
		if pid=$(broker_pid "$n"); then
			pids[$n]=$pid
			kill -TERM "$pid" 2>/dev/null || true
		fi
	done
	for n in "${nodes[@]}"; do
		pid=${pids[$n]:-}
		if [[ -n $pid ]]; then
			for _ in $(seq 1 200); do
				owns "$pid" sluiced --data-dir "$adir/n$n/data" || break
				sleep 0.1
			done
			if owns "$pid" sluiced --data-dir "$adir/n$n/data"; then
				echo "node $n (pid $pid) did not stop in 20 s; killing it" >&2
				kill -KILL "$pid" 2>/dev/null || true
			fi
		fi
		rm -f "$adir/n$n/pid"
	done
	[[ -z ${1:-} ]] || return 0
	if pid=$(s3_pid); then
		kill -TERM "$pid" 2>/dev/null || true
	fi
	rm -f "$adir/s3/pid"
}

# metadata prints "controller ID" and one "leader ID" per partition, from
# one Metadata request to the running brokers; nothing without kcat.
metadata() {
	local seeds=$1
	[[ -n $seeds ]] && command -v kcat >/dev/null || return 0
	local auth=()
	if [[ $secure == 1 ]]; then
		auth=(-X security.protocol=SASL_SSL -X "ssl.ca.location=$certs/ca.crt" -X sasl.mechanisms=PLAIN
			-X sasl.username=admin -X "sasl.password=$(<"$adir/admin-password")")
	fi
	{ kcat -L -m 5 -b "$seeds" "${auth[@]}" 2>/dev/null || true; } | awk '
		/^  broker [0-9]+ at / { print "listed " $2; if (/\(controller\)/) print "controller " $2 }
		/^    partition [0-9]+, leader / { l = $4; sub(/,$/, "", l); print "leader " l }'
}

status() {
	local n pid seeds="" md="" health ready role leads code=0 reason state
	local -A pids=() states=()
	for n in 1 2 3; do
		states[$n]=running
		if pid=$(broker_pid "$n" keep); then
			pids[$n]=$pid
			seeds+="${seeds:+,}$(kafka "$n")"
		elif [[ $? == 2 ]]; then
			states[$n]="stopped stale pid file $adir/n$n/pid"
		else
			states[$n]=stopped
		fi
	done
	md=$(metadata "$seeds")
	printf '%-6s %-3s %-8s %-8s %-8s %-10s %-10s %s\n' BROKER AZ PID PROCESS HEALTHZ READYZ ROLE LEADS
	for n in 1 2 3; do
		pid=${pids[$n]:-}
		health=- ready=- role=- leads=- reason=""
		if [[ -n $pid ]]; then
			health=down ready="not ready"
			hcurl "$(http "$n")/healthz" -sf -m 2 -o /dev/null && health=ok
			if reason=$(hcurl "$(http "$n")/readyz" -sf -m 2 2>/dev/null); then
				ready=ready reason=""
			else
				# The 503's JSON error: its message, unescaped enough to read.
				reason=$(hcurl "$(http "$n")/readyz" -s -m 2 2>/dev/null |
					sed -n 's/^ *"message": "\(.*\)",\{0,1\}$/\1/p' | head -n 1 |
					sed -e 's/\\"/"/g' -e 's/\\u0026/\&/g' -e 's/\\u003c/</g' -e 's/\\u003e/>/g') || true
			fi
			if ! command -v kcat >/dev/null; then
				role="?" leads="?"
			elif [[ -z $md ]]; then
				role="?" leads="?" reason+="${reason:+; }no Metadata answer"
			else
				role=unlisted
				grep -qx "listed $n" <<<"$md" && role=broker
				grep -qx "controller $n" <<<"$md" && role=controller
				leads=$(grep -cx "leader $n" <<<"$md" || true)
			fi
		else
			pid=-
		fi
		[[ $health == ok && $ready == ready ]] || code=3
		state=${states[$n]}
		[[ $state == stopped\ * ]] && reason=${state#stopped } state=stopped
		printf '%-6s %-3s %-8s %-8s %-8s %-10s %-10s %s%s\n' "$n" "${azs[$((n - 1))]}" "$pid" \
			"$state" "$health" "$ready" "$role" "$leads" "${reason:+  ($reason)}"
	done
	return $code
}

case $cmd in
start) start "$node" ;;
stop) stop "$node" ;;
restart)
	stop "$node"
	start "$node"
	;;
status) status ;;
*) usage ;;
esac
