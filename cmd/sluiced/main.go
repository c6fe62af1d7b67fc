// Command sluiced runs one Sluice broker. Every flag can also be set in a
// YAML file given by --config (keys are the flag names); flags on the
// command line win over the file.
//
// Exit status: 0 after a requested shutdown (or --help, --version), 1 when
// the broker could not start or stopped on an error, 2 for a mistake on the
// command line (an unknown flag, a stray argument).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"gopkg.in/yaml.v3"

	"github.com/sluice-mq/sluice/broker"
	"github.com/sluice-mq/sluice/broker/largeobj"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/cmd/internal/version"
	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
)

func main() {
	os.Exit(exitCode(run(os.Args[1:], os.Stdout, os.Stderr), os.Stderr))
}

// errUsage marks a mistake on the command line (exit status 2).
var errUsage = errors.New("usage")

// exitCode reports err on stderr and turns it into the exit status.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		// What was wrong with the command line, and where the flags are
		// listed.
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(stderr, version.Usage("sluiced", ue.msg))
		}
		return 2
	default:
		fmt.Fprintln(stderr, "sluiced:", err)
		return 1
	}
}

// usageError is a command-line mistake the flag package does not report.
type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == errUsage }

func run(args []string, stdout, stderr io.Writer) error {
	cfg := broker.DefaultConfig()
	fs := flag.NewFlagSet("sluiced", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		nodeID      = fs.Int("node-id", int(cfg.NodeID), "broker id")
		configFile  = fs.String("config", "", "YAML file with flag values (keys are flag names)")
		logLevel    = fs.String("log-level", "info", "debug, info, warn or error")
		logFormat   = fs.String("log-format", "console", "console or json")
		partitions  = fs.Int("default-partitions", int(cfg.DefaultPartitions), "partitions of auto-created topics and of CreateTopics asking for the default")
		endpoints   = fs.String("etcd-endpoints", "", "comma-separated URLs of an existing etcd cluster (instead of the embedded one)")
		maxRequestB = fs.Int("max-request-bytes", int(cfg.MaxRequestBytes), "largest Kafka request frame accepted")
		fetchMaxB   = fs.Int("fetch-max-bytes", int(cfg.FetchMaxBytes), "cap on the bytes of one fetch (Kafka and HTTP); the first batch is returned whole even if larger")
		remoteMaxB  = fs.Int("remote-fetch-max-bytes", int(cfg.RemoteFetchMaxBytes), "cap on what one partition of a Kafka fetch reads from object storage (a replay is answered in slices this large)")
		gcPercent   = fs.Int("gc-percent", defaultGCPercent, "Go GC target: heap growth over the live heap before a collection (GOGC); higher trades memory for fewer collections and lower ack latency tails; a GOGC environment variable wins unless this flag is given")
	)
	fs.StringVar(&cfg.AZ, "az", cfg.AZ, "availability zone of this broker")
	fs.StringVar(&cfg.Pool, "pool", "shared", "broker pool: tenants bound to a pool get their new partitions only on its brokers (sluicectl tenant set-pool)")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory for the WAL, embedded etcd and the default object store")
	fs.StringVar(&cfg.KafkaListen, "kafka-listen", cfg.KafkaListen, "Kafka protocol listen address")
	fs.StringVar(&cfg.KafkaAdvertise, "kafka-advertise", "", "address given to clients (default: the listen address)")
	fs.StringVar(&cfg.HTTPListen, "http-listen", cfg.HTTPListen, "HTTP API, /metrics, /healthz and /readyz listen address")
	fs.StringVar(&cfg.InterBrokerListen, "inter-broker-listen", cfg.InterBrokerListen, "inter-broker listen address: replica fetches and election messages from the other brokers, served nowhere else; keep it on the brokers' network (not authenticated unless --inter-broker-security-protocol SSL)")
	// Inter-broker security (broker/node/interbroker_tls.go).
	fs.StringVar(&cfg.InterBrokerSecurityProtocol, "inter-broker-security-protocol", cfg.InterBrokerSecurityProtocol, "PLAINTEXT, or SSL: the inter-broker listener and every dial to another broker's speak mutual TLS with --tls-cert-file, --tls-key-file and --tls-client-ca-file (the certificate needs server and client usage)")
	interBrokerPrincipals := fs.String("inter-broker-principals", "", "with --inter-broker-security-protocol SSL, the certificate principals served on the inter-broker listener, User:broker-1,User:broker-2 (default: --super-users); any other is refused and logged")
	fs.StringVar(&cfg.InterBrokerListener, "inter-broker-listener", "", "name of the listener of --listeners the other brokers use (Kafka's inter.broker.listener.name), e.g. BROKER with --listeners 'CLIENT://…,BROKER://…': it replaces --inter-broker-listen, its protocol (PLAINTEXT, or SSL with --inter-broker-principals) replaces --inter-broker-security-protocol, and it is never named to clients")
	fs.StringVar(&cfg.InterBrokerAdvertise, "inter-broker-advertise", "", "inter-broker address given to the other brokers, never to clients (default: the listen address; with a 0.0.0.0 listen address, its port on the Kafka advertised host)")
	fs.StringVar(&cfg.Meta.ListenClient, "etcd-listen-client", cfg.Meta.ListenClient, "embedded etcd client address")
	fs.StringVar(&cfg.Meta.ListenPeer, "etcd-listen-peer", cfg.Meta.ListenPeer, "embedded etcd peer address")
	fs.StringVar(&cfg.Listeners, "listeners", "", "Kafka listeners, NAME://host:port,... with NAME a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) or one mapped by --listener-security-protocol-map, e.g. 'PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093' (default: one PLAINTEXT listener on --kafka-listen)")
	fs.StringVar(&cfg.AdvertisedListeners, "advertised-listeners", "", "NAME://host:port,... clients are told to dial per listener; Metadata names each broker by the listener the request came in on (default: the listen address)")
	fs.StringVar(&cfg.ListenerSecurityProtocolMap, "listener-security-protocol-map", "", "NAME:PROTOCOL,... for listener names that are not protocols, e.g. CLIENT:SASL_SSL")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert-file", "", "PEM certificate of the TLS listeners (SSL, SASL_SSL) and of the HTTP API (HTTPS); re-read when it changes, so certificates rotate without a restart")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key-file", "", "PEM key of --tls-cert-file")
	fs.StringVar(&cfg.TLSClientCAFile, "tls-client-ca-file", "", "PEM CA of client certificates (mutual TLS): SSL listeners then require one, the HTTP API accepts one, and its CN (or first SAN) is the principal User:<name>")
	saslMechanisms := fs.String("sasl-enabled-mechanisms", strings.Join(cfg.SASLEnabledMechanisms, ","), "SASL mechanisms of SASL listeners: SCRAM-SHA-256, SCRAM-SHA-512, PLAIN")
	fs.BoolVar(&cfg.AllowPlainWithoutTLS, "allow-plain-without-tls", false, "offer PLAIN (which sends the password itself) on SASL_PLAINTEXT listeners too, not only on SASL_SSL")
	fs.BoolVar(&cfg.SASLScramStrictNonce, "sasl-scram-strict-nonce", false, "refuse the SCRAM client-final nonce of librdkafka before 2.6.1 (kcat, confluent-kafka on Debian 12) as Kafka 4 does; by default that one legacy form is accepted as Kafka 3.x did, its proof still checked")
	fs.DurationVar(&cfg.SASLSessionLifetime, "sasl-session-lifetime", cfg.SASLSessionLifetime, "how long a SASL login holds before the client must re-authenticate on its connection (KIP-368); a deleted user or changed password stops working within it (0: the connection's life)")
	peerInterBroker := fs.String("peer-inter-broker", "", "N=host:port,...: dial node N's inter-broker listener here instead of where it registered (inter-broker routes, e.g. through proxies)")
	fs.StringVar(&cfg.Meta.InitialCluster, "etcd-initial-cluster", "", "embedded etcd members, 1=http://host:port,2=... (default: this broker alone)")
	fs.StringVar(&cfg.Meta.CACertFile, "etcd-cacert", "", "PEM CA bundle verifying etcd's TLS certificate (default with https:// --etcd-endpoints: the system roots); embedded, with --etcd-cert and --etcd-key, the member's client port serves mutual TLS and requires client certificates from this CA")
	fs.StringVar(&cfg.Meta.CertFile, "etcd-cert", "", "PEM client certificate presented to etcd (needs --etcd-key); embedded, also the member's client-port server certificate, so it needs both server and client usage and must name the listen host (127.0.0.1 when listening on 0.0.0.0)")
	fs.StringVar(&cfg.Meta.KeyFile, "etcd-key", "", "PEM key of --etcd-cert")
	fs.StringVar(&cfg.Meta.Username, "etcd-username", "", "user of etcd's own authentication (needs --etcd-password-file)")
	fs.StringVar(&cfg.Meta.PasswordFile, "etcd-password-file", "", "file whose first line is the password of --etcd-username")
	fs.StringVar(&cfg.Meta.PeerCertFile, "etcd-peer-cert-file", "", "embedded etcd: PEM certificate for mutual TLS between members (server and client usage); with it, --etcd-peer-key-file and --etcd-peer-trusted-ca-file every peer URL is https://")
	fs.StringVar(&cfg.Meta.PeerKeyFile, "etcd-peer-key-file", "", "embedded etcd: PEM key of --etcd-peer-cert-file")
	fs.StringVar(&cfg.Meta.PeerTrustedCAFile, "etcd-peer-trusted-ca-file", "", "embedded etcd: PEM CA bundle the members' peer certificates must chain to")
	fs.StringVar(&cfg.ObjectStore, "object-store", "", "file:///path or s3://bucket/prefix?endpoint=...&region=... (default: file://<data-dir>/objects)")
	fs.Int64Var(&cfg.ReadCacheBytes, "read-cache-bytes", cfg.ReadCacheBytes, "bytes of remote object ranges kept in memory for replays")
	fs.Int64Var(&cfg.PageCacheTailBytes, "page-cache-tail-bytes", cfg.PageCacheTailBytes, "bytes of each partition's newest log left in the page cache; older ones are dropped from it once fsynced, so appends reuse those pages (0: leave it to the kernel)")
	fs.Int64Var(&cfg.LocalMaxBytes, "local-max-bytes", 0, "refuse produce (retriable) while the local logs hold this many bytes, e.g. when uploads fail; 0: no limit")
	fs.Int64Var(&cfg.DiskMinFreeBytes, "disk-min-free-bytes", cfg.DiskMinFreeBytes, "refuse produce (retriable) while the data dir's file system has less free: the reserve below the disk watermarks")
	fs.Func("disk-watermarks", "three percentages of the data dir's file system in use, e.g. 80,90,95: above the first no new topics or partitions, the second no bursts for low-priority tenants, the third no publishes of tenants over quota; each is left 2 points below it (default: off)", func(s string) error {
		w, err := node.ParseWatermarks(s)
		cfg.DiskWatermarks = w
		return err
	})
	fs.DurationVar(&cfg.ScrubInterval, "scrub-interval", cfg.ScrubInterval, "how often the controller removes orphaned objects from the bucket (0: never)")
	fs.DurationVar(&cfg.TierGrace, "tier-grace", cfg.TierGrace, "how long an object stays after retention passed it, for readers still streaming it")
	fs.DurationVar(&cfg.UploadSessionTTL, "upload-session-ttl", largeobj.DefaultTTL, "how long a large-payload upload session may stay open, and a completed one unpublished, before its bytes are deleted")
	fs.Int64Var(&cfg.MaxObjectBytes, "max-object-bytes", largeobj.DefaultMaxObjectBytes, "largest payload an upload session accepts (POST /v1/uploads answers 413 above it)")
	fs.IntVar(&cfg.TierChunkBytes, "tier-chunk-bytes", 0, "target chunk size of uploaded objects, the unit of a ranged read (default 4 MiB)")
	fs.Int64Var(&cfg.Journal.FileBytes, "journal-file-bytes", wal.DefaultJournalFileBytes, "size of one broker journal file")
	fs.Int64Var(&cfg.Journal.CheckpointBytes, "journal-checkpoint-bytes", wal.DefaultJournalCheckpointBytes, "journal bytes between checkpoints (bounds the replay after a crash)")
	fs.DurationVar(&cfg.Journal.CheckpointEvery, "journal-checkpoint-interval", wal.DefaultJournalCheckpointEvery, "longest time between journal checkpoints while records arrive")
	fs.BoolVar(&cfg.PerPartitionFsync, "per-partition-fsync", cfg.PerPartitionFsync, "fsync each partition's segments per group commit instead of sharing the broker journal's (for comparisons)")
	fs.BoolVar(&cfg.AutoCreateTopics, "auto-create-topics", cfg.AutoCreateTopics, "create topics on first use, as Kafka does")
	fs.IntVar(&cfg.DefaultReplicationFactor, "default-replication-factor", cfg.DefaultReplicationFactor, "replicas of a topic created without a replication factor (auto-created, or asking for the default); 0: one per AZ of the live brokers, at most 3")
	fs.Int64Var(&cfg.DefaultRetentionMs, "default-retention-ms", cfg.DefaultRetentionMs, "retention.ms of a topic that sets none (Kafka's log.retention.ms; -1: keep forever)")
	fs.IntVar(&cfg.DefaultMinInsyncReplicas, "default-min-insync-replicas", cfg.DefaultMinInsyncReplicas, "min.insync.replicas of a topic that sets none; a write is committed on at least a majority of a partition's replicas whatever it says")
	fs.DurationVar(&cfg.Coordinator.MinSessionTimeout, "group-min-session-timeout", cfg.Coordinator.MinSessionTimeout, "shortest consumer session timeout accepted")
	fs.DurationVar(&cfg.Coordinator.MaxSessionTimeout, "group-max-session-timeout", cfg.Coordinator.MaxSessionTimeout, "longest consumer session timeout accepted")
	fs.DurationVar(&cfg.Coordinator.OffsetsRetention, "offsets-retention", cfg.Coordinator.OffsetsRetention, "how long committed offsets outlive a group's last member")
	fs.DurationVar(&cfg.ProducerIDExpiration, "producer-id-expiration", cfg.ProducerIDExpiration, "how long an idle idempotent producer's state is kept")
	fs.DurationVar(&cfg.RetentionCheckInterval, "retention-check-interval", cfg.RetentionCheckInterval, "how often segments are rolled by age and retention is applied")
	fs.Int64Var(&cfg.QueuedMaxRequestBytes, "queued-max-request-bytes", cfg.QueuedMaxRequestBytes, "request bytes held at once over all connections; when spent the broker stops reading requests")
	fs.IntVar(&cfg.MaxConnections, "max-connections", cfg.MaxConnections, "open Kafka connections accepted; more are closed at accept")
	fs.IntVar(&cfg.MaxConnectionsPerIP, "max-connections-per-ip", cfg.MaxConnectionsPerIP, "open Kafka connections accepted from one client IP (0: no per-IP limit)")
	fs.Int64Var(&cfg.MinReceiveRate, "min-receive-rate", cfg.MinReceiveRate, "bytes/s a Kafka connection must deliver while a request is partly received, measured over 10s; a slower one is closed (0: off)")
	fs.DurationVar(&cfg.ConnectionsMaxIdle, "connections-max-idle", cfg.ConnectionsMaxIdle, "close a Kafka connection with no request in flight and none received for this long")
	fs.DurationVar(&cfg.RegistrationTTL, "registration-ttl", cfg.RegistrationTTL, "lease of the broker's registration in etcd: a broker that stops renewing it (crashed, paused, cut off) leaves the cluster this long after, and its partitions get new leaders")
	fs.DurationVar(&cfg.ControllerTTL, "controller-ttl", cfg.ControllerTTL, "lease of the controller's election key: how long after the controller's loss another broker takes over")
	fs.BoolVar(&cfg.Canary, "canary", false, "run the canary of this broker's AZ (broker/canary): publish records with stable ids to __sluice_canary through this broker's Kafka listener (PLAINTEXT), consume them in the group __sluice_canary.<az>, write each id's result to <data-dir>/canary, commit, and reconcile; exported as sluice_canary_* (docs/metrics.md)")
	fs.DurationVar(&cfg.CanaryInterval, "canary-interval", time.Second, "time between the canary's rounds (one record per partition of its topic each)")
	fs.DurationVar(&cfg.CanaryTimeout, "canary-timeout", 5*time.Second, "longest a canary publish may take before it counts as failed (sluice_canary_failures_total{stage=\"publish\"}); a failover longer than it shows as an outage")
	// Security (broker/security, the HTTP pipeline).
	fs.BoolVar(&cfg.SecurityEnabled, "security", cfg.SecurityEnabled, "require credentials on the HTTP API (API key, Basic, or a client certificate) and authorise every request by the ACLs; off (the development default) every request is anonymous and allowed")
	superUsers := fs.String("super-users", "", "principals allowed everything in every tenant, User:a,User:b (';' separates too, as in Kafka)")
	fs.BoolVar(&cfg.AllowEveryoneIfNoACLFound, "allow-everyone-if-no-acl-found", cfg.AllowEveryoneIfNoACLFound, "allow an operation on a resource no ACL applies to (default: true while --security is off, false when it is on)")
	fs.StringVar(&cfg.AdminPasswordFile, "admin-password-file", "", "create the tenants system and default and the super user admin (tenant system) with this file's password, if admin does not exist; an existing admin is never changed")
	volatile := fs.Bool("crash-loses-unsynced", false, "testing: keep every byte of the broker's logs not yet fsynced in process memory (wal/vfs.Volatile), so a kill -9 loses it as a power cut would; slower, never for production")
	clockFile := fs.String("clock-offset-file", "", "testing: shift the clock of retention, tiering, producer expiry and group sessions by the duration in this file (re-read every 100 ms), for clock-jump tests")
	showVersion := fs.Bool("version", false, "print the version and exit")
	// A mistaken flag is answered with one line and a hint, as git does: the
	// whole flag list would push the mistake off the screen (and out of the
	// tail of a log). --help prints the list.
	fs.Usage = func() {}
	fs.SetOutput(io.Discard) // the flag package would print the mistake too
	if len(args) == 1 && args[0] == "help" {
		args = []string{"--help"}
	}
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) { // usage on stdout: asked for, not a mistake
			fmt.Fprintln(stdout, "usage: sluiced [flags]\n\nflags:")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			fs.SetOutput(stderr)
			return err
		}
		return &usageError{msg: err.Error()}
	}
	if *showVersion {
		fmt.Fprintln(stdout, version.String("sluiced"))
		return nil
	}
	// sluiced takes no arguments: a word such as "status" is a mistake,
	// not a broker to start with every setting at its default.
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("unexpected argument %q (sluiced takes only flags)", fs.Arg(0))}
	}
	if *configFile != "" {
		if err := applyConfigFile(fs, *configFile); err != nil {
			return err
		}
	}
	cfg.NodeID = int32(*nodeID)
	cfg.DefaultPartitions = int32(*partitions)
	cfg.MaxRequestBytes = int32(*maxRequestB)
	if *fetchMaxB > math.MaxInt32 {
		return fmt.Errorf("--fetch-max-bytes %d is above %d", *fetchMaxB, math.MaxInt32)
	}
	cfg.FetchMaxBytes = int32(*fetchMaxB)
	cfg.RemoteFetchMaxBytes = int32(min(*remoteMaxB, math.MaxInt32))
	if *endpoints != "" {
		cfg.Meta.Endpoints = strings.Split(*endpoints, ",")
	}
	if !flagGiven(fs, "allow-everyone-if-no-acl-found") {
		// Open resources are a development convenience: only while
		// security is off, unless asked for.
		cfg.AllowEveryoneIfNoACLFound = !cfg.SecurityEnabled
	}
	cfg.SuperUsers = parseSuperUsers(*superUsers)
	cfg.InterBrokerPrincipals = parseSuperUsers(*interBrokerPrincipals)
	if cfg.Listeners != "" && (flagGiven(fs, "kafka-listen") || flagGiven(fs, "kafka-advertise")) {
		return &usageError{msg: "--listeners replaces --kafka-listen and --kafka-advertise; give one or the other"}
	}
	if cfg.InterBrokerListener != "" {
		// The named listener replaces these defaults; a value given beside
		// it is refused by the configuration's check.
		if !flagGiven(fs, "inter-broker-listen") {
			cfg.InterBrokerListen = ""
		}
		if !flagGiven(fs, "inter-broker-security-protocol") {
			cfg.InterBrokerSecurityProtocol = ""
		}
	}
	cfg.SASLEnabledMechanisms = nil
	for m := range strings.SplitSeq(*saslMechanisms, ",") {
		if m = strings.ToUpper(strings.TrimSpace(m)); m != "" {
			cfg.SASLEnabledMechanisms = append(cfg.SASLEnabledMechanisms, m)
		}
	}
	var perr error
	if cfg.PeerInterBroker, perr = parsePeers("--peer-inter-broker", *peerInterBroker); perr != nil {
		return perr
	}

	logger, err := newLogger(*logLevel, *logFormat)
	if err != nil {
		return err
	}
	if os.Getenv("GOGC") == "" || flagGiven(fs, "gc-percent") {
		debug.SetGCPercent(*gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if *clockFile != "" {
		clock := newOffsetClock(*clockFile, logger)
		go clock.run(ctx)
		cfg.Now, cfg.Coordinator.Now = clock.Now, clock.Now
	}
	var vol *vfs.Volatile
	if *volatile {
		vol = vfs.NewVolatile(vfs.OS)
		cfg.FS = vol
		logger.Warn().Msg("--crash-loses-unsynced: unsynced writes are held in memory; a crash loses them (testing only)")
	}
	b, err := broker.New(cfg, logger)
	if err != nil {
		return err
	}
	if vol != nil {
		// A clean stop keeps what it wrote, as the page cache would.
		defer func() { _ = vol.Flush() }()
	}
	return b.Run(ctx)
}

// defaultGCPercent is the broker's GC target, Go's own default. Raising it
// trades memory for fewer collections: at 20,000 records/s over 8
// partitions, 400 gave an ack p99 of 3.1 ms against 4.3 ms, for a peak RSS
// of 68 MB against 46 MB; but under a flood of half-sent requests the
// garbage of the growing request buffers then stays longer (e2e's
// TestRequestFlood grew by 161 MiB against its 110 MiB bound), so the
// default stays where the request budget's bound holds (docs/durability.md).
const defaultGCPercent = 100

// parseSuperUsers splits --super-users (and --inter-broker-principals) at
// ',' or ';' (Kafka's super.users separator); the broker's Validate checks
// each principal.
func parseSuperUsers(v string) []string {
	var out []string
	for _, p := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ';' }) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// flagGiven reports whether name was set on the command line or by the
// config file.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// applyConfigFile sets every flag named in the YAML file that was not given
// on the command line.
func applyConfigFile(fs *flag.FlagSet, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		return fmt.Errorf("parse config %s: %w", path, err)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for key, v := range values {
		if fs.Lookup(key) == nil || key == "config" {
			return fmt.Errorf("config %s: unknown key %q", path, key)
		}
		if given[key] {
			continue
		}
		if err := fs.Set(key, fmt.Sprint(v)); err != nil {
			return fmt.Errorf("config %s: %s: %w", path, key, err)
		}
	}
	return nil
}

func newLogger(level, format string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		return zerolog.Logger{}, fmt.Errorf("--log-level: %w", err)
	}
	var out = zerolog.New(os.Stderr)
	switch format {
	case "json":
	case "console":
		fi, err := os.Stderr.Stat()
		color := err == nil && fi.Mode()&os.ModeCharDevice != 0
		out = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.RFC3339Nano, NoColor: !color})
	default:
		return zerolog.Logger{}, fmt.Errorf("--log-format %q: use console or json", format)
	}
	return out.Level(lvl).With().Timestamp().Logger(), nil
}

// parsePeers parses "N=host:port,..." into node id → address.
func parsePeers(flagName, v string) (map[int32]string, error) {
	if v == "" {
		return nil, nil
	}
	out := map[int32]string{}
	for _, item := range strings.Split(v, ",") {
		id, addr, ok := strings.Cut(item, "=")
		n, err := strconv.ParseInt(id, 10, 32)
		if !ok || err != nil || n < 0 {
			return nil, fmt.Errorf("%s: %q is not N=host:port", flagName, item)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", flagName, item, err)
		}
		out[int32(n)] = addr
	}
	return out, nil
}
