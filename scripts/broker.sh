# scripts/broker.sh — sourced by profile.sh and latency.sh: start_broker BIN
# DIR starts one sluiced from BIN with its data in DIR on free 127.0.0.1
# ports, waits until /readyz answers, and sets PID, K (Kafka port) and H
# (HTTP port). The caller's EXIT trap stops $PID.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

start_broker() {
	local bin=$1 dir=$2 c p
	K=$(free_port); H=$(free_port); c=$(free_port); p=$(free_port)
	"$bin" --data-dir "$dir/data" --kafka-listen 127.0.0.1:$K --http-listen 127.0.0.1:$H \
		--inter-broker-listen 127.0.0.1:$(free_port) \
		--etcd-listen-client 127.0.0.1:$c --etcd-listen-peer 127.0.0.1:$p --log-level warn > "$dir/broker.log" 2>&1 &
	PID=$!
	for _ in $(seq 1 120); do
		curl -sf 127.0.0.1:$H/readyz >/dev/null && return 0
		kill -0 $PID 2>/dev/null || { cat "$dir/broker.log" >&2; return 1; }
		sleep 0.5
	done
	echo "sluiced not ready after 60 s" >&2
	return 1
}
