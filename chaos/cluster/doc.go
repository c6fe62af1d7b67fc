// Package cluster is the process control of the chaos suite: it runs a real
// three-broker Sluice cluster on loopback — three sluiced processes whose
// embedded etcd members form one etcd cluster, sharing one bucket on
// Versity's S3 gateway (versitygw, posix backend), as deploy/cluster.sh
// starts them — and kills (SIGKILL), pauses (SIGSTOP), resumes (SIGCONT),
// restarts and stops them. It learns what the cluster thinks only over the
// wire: Metadata over the Kafka protocol (franz-go), /readyz and /metrics
// over HTTP. Like the rest of chaos/ it never imports broker, wal, tier or
// meta.
//
// # Work directory
//
// Start makes a new cluster in Config.Dir; it refuses a Dir that already
// holds one (attaching to a running cluster is not supported).
//
//	Dir/s3/root/sluice/        the bucket (versitygw's posix backend serves Dir/s3/root)
//	Dir/s3/root/sluice/chaos/  the brokers' objects (--object-store s3://sluice/chaos?…)
//	Dir/s3/versitygw.log       the gateway's stdout and stderr
//	Dir/nN/data/               broker N's --data-dir (WAL, journal, etcd member)
//	Dir/nN/sluiced.log         broker N's stdout and stderr, every run appended
//
// Each run of a process begins its log with a line
// "=== chaos/cluster: start #K …" naming the binary and its arguments, so a
// log read after a crash and restart shows which run said what.
//
// # Brokers
//
// Broker N (1, 2, 3) runs in AZ "a", "b", "c" with four loopback ports of
// its own (Kafka, HTTP, etcd client, etcd peer), picked free at Start and
// kept for its life: a restart reuses the ports, arguments and data dir, so
// the etcd member and the Kafka address clients know stay valid. If a port
// picked free is taken by the time a process binds it ("address already in
// use" in its log), Start tries again on fresh ports and fresh data dirs, up
// to three times. A restart cannot move, and fails instead.
//
// The brokers reach the bucket with random credentials of this cluster,
// given to each child through AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_REGION (any AWS_* variable of the parent is dropped).
//
// # Lifetimes
//
// Invariant: every child process is started from one OS thread that a
// goroutine of this package holds locked until Stop, with Pdeathsig SIGKILL
// (Linux), so the children die with the parent process — even when it is
// killed — and not earlier: the kernel sends the parent-death signal when
// the thread that forked a child ends, and Go ends a thread only when a
// goroutine locked to it returns.
//
// Invariant: every process is reaped by a goroutine of its own that ends
// when the process exits; Stop kills whatever SIGTERM did not end within
// Config.StopTimeout, so every such goroutine has ended when Stop returns.
//
// A process exit the Cluster did not cause (a crash, a failed start) is
// kept and reported by Stop, because in a chaos run a broker dying on its
// own is a finding.
//
// # Files
//
//	cluster.go  Config, Start, Cluster, Broker and the fault operations
//	process.go  one child process: its runs, signals, reaping and log
//	spawn.go    the locked OS thread that forks every child
//	s3.go       the versitygw child and its bucket
//	wire.go     readiness, Metadata (Leader, Controller) and /metrics
package cluster
