// Package cluster is the process control of the chaos suite: it runs a real
// three-broker Sluice cluster on loopback — three sluiced processes whose
// embedded etcd members form one etcd cluster (or, with
// Config.ExternalEtcd, which share one etcd server of the cluster's own),
// sharing one bucket on Versity's S3 gateway (versitygw, posix backend), as
// deploy/cluster.sh starts them — and kills (SIGKILL), pauses (SIGSTOP),
// resumes (SIGCONT), restarts and stops them, cuts their links to etcd, and
// fills their disks. It learns what the cluster thinks only over the
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
//	Dir/etcd/data/             the etcd server's data (Config.ExternalEtcd)
//	Dir/etcd/etcd.log          the etcd server's log, JSON lines, info level
//	Dir/nN/data/               broker N's --data-dir (WAL, journal, etcd member)
//	Dir/nN/data/chaos-filler   what FillDisk wrote (Config.DataDirBytes)
//	Dir/nN/sluiced.log         broker N's stdout and stderr, every run appended
//
// With Config.DataDirBytes, each Dir/nN/data is a tmpfs of that size that
// Start mounts before any process runs (Linux, as root or with
// CAP_SYS_ADMIN; otherwise Start fails with ErrNoMount) and Stop unmounts
// once the brokers have exited, detaching it if a plain unmount fails. What
// the brokers kept there is gone after Stop; their logs are outside. A
// process killed before Stop leaves the mounts: umount Dir/n*/data. The
// option needs ExternalEtcd, and Start refuses it without: an embedded
// etcd member preallocates 64 MB WAL files in the data dir. A tmpfs has no
// durability of its own, but a killed broker loses nothing written to one:
// SIGKILL spares the page cache, as a real disk's.
//
// Each run of a process begins its log with a line
// "=== chaos/cluster: start #K …" naming the binary and its arguments, so a
// log read after a crash and restart shows which run said what.
//
// # Brokers
//
// Broker N (1, 2, 3) runs in AZ "a", "b", "c" with five loopback ports of
// its own (Kafka, HTTP, inter-broker, etcd client, etcd peer), picked free at Start and
// kept for its life: a restart reuses the ports, arguments and data dir, so
// the etcd member and the Kafka address clients know stay valid. If a port
// picked free is taken by the time a process binds it ("address already in
// use" in its log), Start tries again on fresh ports and fresh data dirs, up
// to three times. A restart cannot move, and fails instead.
//
// With Config.ExternalEtcd the brokers embed no etcd member and have two
// ports each (Kafka, HTTP, inter-broker). One etcd server runs inside the calling process
// (etcd's embed package, one member, on two free loopback ports, retried
// the same way), and broker N is started with --etcd-endpoints naming only
// its own chaos/netproxy proxy to it (EtcdProxy(N)), which its etcd client
// keeps (it never syncs the member list), so a fault on that proxy reaches
// broker N's link to etcd and no other. The server and the proxies live as
// long as the Cluster: a restarted broker dials the same proxy, with
// whatever fault is set on it, and what a failed start attempt's brokers
// registered stays in etcd until their leases expire.
//
// Cut off from etcd (measured with the default TTLs, 3 s and 2 s), a broker
// keeps running and answering /readyz with 200. Its registration lease
// expires 2 to 3.5 s after the cut (one TTL after its last renewal), and the
// other brokers then drop it from their Metadata and elect another
// controller; its own Metadata meanwhile still lists every broker and names
// the controller it last knew (itself, if it was). Once the link heals it
// registers again and is listed within a second, unless the cut made its
// etcd client back off between reconnections (Cut refuses connections at
// accept; Blackhole and Stall do not), which delays it by that backoff:
// about 5 s after a 10 s Cut.
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
// Invariant: the proxies, the etcd server and the tmpfs mounts outlive every
// broker: Stop closes the proxies, then the etcd server, then unmounts the
// data dirs, only after the brokers have exited (a broker deregisters from
// etcd through its proxy while it shuts down). Being part of the calling
// process, the etcd server dies with it; the mounts do not.
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
//	etcd.go     the cluster's own etcd server and the brokers' proxies to it
//	disk.go     tmpfs data dirs, FillDisk and FreeDisk
//	tmpfs_*.go  mount, unmount and statfs (Linux; ErrNoMount elsewhere)
//	wire.go     readiness, Metadata (Leader, Controller) and /metrics
//	drain.go    a clean stop (Terminate), admin calls to one broker and its broker listing
package cluster
