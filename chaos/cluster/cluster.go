package cluster

// cluster.go owns a Cluster's lifetime and its fault operations: Config,
// Start (the data dirs' tmpfs mounts, the S3 gateway, the etcd server, then
// three brokers on free ports, retried when a port was taken), Kill, Pause,
// Resume, Restart, KillAll, RestartAll, Up and Stop. Each process guards its
// own state (process.go); Cluster.life guards stopped, and every operation
// holds it for reading while it runs, so Stop waits for operations in flight
// and none starts after it.
//
// Invariant: brokers[i] is node id i+1; a Broker's addresses, data dir and
// arguments never change after Start returns.
// Invariant: after Stop returns, no child of the Cluster is alive, its
// proxies and etcd server are closed and its tmpfs mounts are gone.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-mq/sluice/internal/freeport"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/chaos/netproxy"
	"github.com/sluice-mq/sluice/chaos/s3fault"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// Size is the number of brokers (and, without Config.ExternalEtcd, of
	// etcd members) of a Cluster.
	Size = 3

	defaultRegistrationTTL = 3 * time.Second
	defaultControllerTTL   = 2 * time.Second
	defaultReadyTimeout    = 60 * time.Second
	defaultStopTimeout     = 10 * time.Second
	defaultLogLevel        = "info"

	startAttempts  = 3 // a port picked free may be taken before it is bound
	pollInterval   = 50 * time.Millisecond
	requestTimeout = 5 * time.Second // one HTTP or Kafka request of a poll
	addrInUse      = "address already in use"
)

// Config describes a cluster to start.
type Config struct {
	// Dir is the work directory: the brokers' data dirs, every log and the
	// S3 root (layout in the package doc). Made if missing; it must not
	// hold a cluster already.
	Dir string
	// Sluiced is the path of the sluiced binary.
	Sluiced string
	// VersityGW is the path of the versitygw binary.
	VersityGW string
	// ExtraArgs are more sluiced flags for every broker; they come last, so
	// they override the flags this package sets.
	ExtraArgs []string
	// S3Proxy puts one chaos/netproxy proxy between the brokers and the S3
	// gateway (S3Proxy()), so a scenario can cut, stall or delay object
	// storage while the brokers run.
	S3Proxy bool
	// S3Faults puts a chaos/s3fault proxy between the brokers and the S3
	// gateway (S3Faults()), behind the S3Proxy when there is one, so a
	// scenario can make object storage answer errors, lose responses, cut
	// GET bodies short or lag.
	S3Faults bool
	// BrokerArgs, when set, gives more sluiced flags for one broker (its
	// own clock file, say); they come after ExtraArgs.
	BrokerArgs func(id int32) []string
	// PeerMesh routes every broker-to-broker link (replica fetches and
	// replication messages, both to a peer's inter-broker listener)
	// through its own proxy of a chaos/netproxy mesh (Mesh), so a
	// scenario can cut or delay one link while clients and etcd still reach
	// every broker.
	PeerMesh bool
	// ExternalEtcd runs one etcd server of the cluster's own, inside the
	// calling process, instead of an embedded member in every broker; each
	// broker reaches it through a chaos/netproxy proxy of its own
	// (EtcdProxy), so a scenario can cut, blackhole or stall one broker's
	// link to etcd, in one direction or both, while etcd itself stays up.
	ExternalEtcd bool
	// Tenants turns security on for tenants' clients: each broker keeps
	// its PLAINTEXT listener (KafkaAddr) for the anonymous principal of
	// the default tenant, which every ACL-less resource allows
	// (--allow-everyone-if-no-acl-found), and adds a SASL_PLAINTEXT one
	// (SASLAddr) for SCRAM users of other tenants. The super user admin's
	// password is AdminPassword; Admin calls the HTTP admin API as admin.
	Tenants bool
	// DataDirBytes, when > 0, makes each broker's data dir a tmpfs of this
	// size, mounted by Start and unmounted by Stop (Linux, as root; Start
	// fails with ErrNoMount otherwise), so FillDisk can bring a broker to a
	// full disk. It needs ExternalEtcd: an embedded etcd member would keep
	// its 64 MB preallocated WAL files in the data dir. Size it for what a
	// broker takes before it stores a record: its journal preallocates four
	// files of --journal-file-bytes (64 MiB by default), and it refuses
	// produce below --disk-min-free-bytes free (64 MiB by default); shrink
	// them with ExtraArgs for a smaller tmpfs.
	DataDirBytes int64
	// RegistrationTTL and ControllerTTL are --registration-ttl and
	// --controller-ttl; short by default (3 s, 2 s), so failovers are quick.
	RegistrationTTL, ControllerTTL time.Duration
	// ReadyTimeout bounds each wait for a process to be ready (Start,
	// Restart, RestartAll); default 60 s.
	ReadyTimeout time.Duration
	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL;
	// default 10 s.
	StopTimeout time.Duration
	// LogLevel is sluiced's --log-level; default info.
	LogLevel string
	// Logger receives what the Cluster does (starts, kills, pauses); the
	// zero value is a no-op.
	Logger zerolog.Logger
}

func (c *Config) setDefaults() {
	if c.RegistrationTTL == 0 {
		c.RegistrationTTL = defaultRegistrationTTL
	}
	if c.ControllerTTL == 0 {
		c.ControllerTTL = defaultControllerTTL
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = defaultReadyTimeout
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = defaultStopTimeout
	}
	if c.LogLevel == "" {
		c.LogLevel = defaultLogLevel
	}
}

// Validate reports a configuration Start cannot use.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("chaos/cluster: no work directory")
	case c.Sluiced == "":
		return errors.New("chaos/cluster: no sluiced binary")
	case c.VersityGW == "":
		return errors.New("chaos/cluster: no versitygw binary")
	case c.RegistrationTTL < 0, c.ControllerTTL < 0, c.ReadyTimeout < 0, c.StopTimeout < 0:
		return errors.New("chaos/cluster: negative duration")
	case c.DataDirBytes < 0:
		return fmt.Errorf("chaos/cluster: negative DataDirBytes %d", c.DataDirBytes)
	case c.DataDirBytes > 0 && !c.ExternalEtcd:
		return errors.New("chaos/cluster: DataDirBytes needs ExternalEtcd: a broker's embedded etcd member " +
			"preallocates 64 MB WAL files in its data dir, which would fill a small tmpfs by itself")
	}
	return nil
}

// Broker is one sluiced process of the cluster. Its fields never change.
type Broker struct {
	ID        int32
	AZ        string
	KafkaAddr string
	HTTPAddr  string
	// InterBrokerAddr is the listener of replica fetches and election
	// messages: the other brokers dial it (through the peer mesh, when
	// there is one); clients never do.
	InterBrokerAddr string
	// SASLAddr is the SASL_PLAINTEXT listener, with Config.Tenants only.
	SASLAddr string
	// EtcdClientAddr and EtcdPeerAddr are the listeners of the broker's
	// embedded etcd member; empty with Config.ExternalEtcd.
	EtcdClientAddr string
	EtcdPeerAddr   string
	DataDir        string
	LogPath        string

	proc *process
}

// PID is the process id of the broker's live run, or 0 when it is not
// running.
func (b *Broker) PID() int { return b.proc.pid() }

// Cluster is three running brokers and their S3 gateway.
type Cluster struct {
	cfg     Config
	log     zerolog.Logger
	spawn   *spawner
	s3      *s3Server
	brokers []*Broker       // fixed after Start
	mesh    *netproxy.Mesh  // with Config.PeerMesh; fixed after Start
	s3proxy *netproxy.Proxy // with Config.S3Proxy; fixed after Start
	s3fault *s3fault.Proxy  // with Config.S3Faults; fixed after Start
	etcd    *etcdServer     // with Config.ExternalEtcd; fixed after Start
	mounts  []string        // with Config.DataDirBytes: the tmpfs mount points, written by Start only
	http    *http.Client

	mu      sync.Mutex
	clients map[int32]*kgo.Client // guarded by mu: one per broker, pinned to it

	life    sync.RWMutex
	stopped bool  // guarded by life
	stopErr error // guarded by life: what the first Stop returned
}

// Start mounts the data dirs' tmpfs (Config.DataDirBytes), starts the S3
// gateway, the etcd server (Config.ExternalEtcd) and then three brokers,
// and returns once every broker answers /readyz with 200 and lists the
// three brokers and a controller in its Metadata. ctx bounds the start
// only: the processes run until Stop. On failure everything started is
// stopped and every mount made is unmounted.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, sub := range []string{"s3", "etcd", "n1", "n2", "n3"} {
		if _, err := os.Stat(filepath.Join(cfg.Dir, sub)); err == nil {
			return nil, fmt.Errorf("chaos/cluster: %s already holds a cluster (%s exists)", cfg.Dir, sub)
		}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("chaos/cluster: make work dir: %w", err)
	}
	c := &Cluster{
		cfg:     cfg,
		log:     cfg.Logger.With().Str("component", "chaos/cluster").Logger(),
		spawn:   newSpawner(),
		http:    &http.Client{Transport: &http.Transport{}, Timeout: requestTimeout},
		clients: map[int32]*kgo.Client{},
	}
	if cfg.Tenants {
		if err := os.WriteFile(c.adminPasswordFile(), []byte(AdminPassword+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("chaos/cluster: admin password: %w", err)
		}
	}
	if cfg.DataDirBytes > 0 {
		if err := c.mountDataDirs(); err != nil {
			return nil, errors.Join(err, c.stop(false))
		}
	}
	s3, err := startS3(ctx, cfg, c.spawn)
	if err != nil {
		return nil, errors.Join(err, c.stop(false))
	}
	c.s3 = s3
	c.log.Info().Str("endpoint", s3.info.Endpoint).Int("pid", s3.proc.pid()).Msg("S3 gateway ready")
	s3upstream := s3.info.Endpoint
	if cfg.S3Faults {
		p, err := s3fault.New(s3fault.Config{Upstream: s3.info.Endpoint, Logger: c.log})
		if err != nil {
			_ = c.stop(false)
			return nil, fmt.Errorf("chaos/cluster: S3 fault proxy: %w", err)
		}
		c.s3fault = p
		s3upstream = p.URL()
	}
	if cfg.S3Proxy {
		p, err := netproxy.New(netproxy.Config{Upstream: strings.TrimPrefix(s3upstream, "http://"), Name: "brokers->s3", Logger: c.log})
		if err != nil {
			_ = c.stop(false)
			return nil, fmt.Errorf("chaos/cluster: S3 proxy: %w", err)
		}
		c.s3proxy = p
	}
	if cfg.ExternalEtcd {
		e, err := startEtcd(ctx, cfg, c.log)
		if err != nil {
			return nil, errors.Join(err, c.stop(false))
		}
		c.etcd = e
		c.log.Info().Str("client", e.addr).Msg("etcd ready")
	}
	if err := c.startBrokers(ctx); err != nil {
		// err names the broker that failed, with its log; the exits of the
		// failed attempt are not repeated.
		return nil, errors.Join(err, c.stop(false))
	}
	return c, nil
}

// startBrokers starts the three brokers, on fresh ports and data dirs
// while a port picked free turns out to be taken.
func (c *Cluster) startBrokers(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		if err := c.makeBrokers(); err != nil {
			return err
		}
		err := c.launchAll(ctx)
		if err == nil {
			err = poll(ctx, c.cfg.ReadyTimeout, nil, c.formed)
			if err != nil {
				err = fmt.Errorf("chaos/cluster: the brokers did not form a cluster: %w", err)
			}
		}
		if err == nil {
			return nil
		}
		taken := c.killStarted()
		if attempt < startAttempts && taken != nil {
			c.log.Warn().Int("attempt", attempt).Err(taken).Msg("a port picked free was taken; trying fresh ones")
			continue
		}
		return fmt.Errorf("chaos/cluster: start the brokers (attempt %d): %w", attempt, err)
	}
}

// killStarted kills every broker still running after a failed start and
// returns an error naming one whose log says a port was taken, or nil.
func (c *Cluster) killStarted() error {
	var taken error
	for _, b := range c.brokers {
		_ = b.proc.kill() // errNotRunning when it exited by itself
		if taken == nil && b.proc.outputContains(addrInUse) {
			taken = fmt.Errorf("broker %d: %s", b.ID, addrInUse)
		}
	}
	return taken
}

// makeBrokers picks the ports and makes empty data dirs for three new
// brokers whose etcd members form one cluster (or which share the
// cluster's etcd server).
func (c *Cluster) makeBrokers() error {
	perBroker := 5 // Kafka, HTTP, inter-broker, etcd client, etcd peer
	if c.etcd != nil {
		perBroker = 3
	}
	if c.cfg.Tenants {
		perBroker++ // the SASL listener, last
	}
	ports, err := freePorts(perBroker * Size) // at once, so no two are the same
	if err != nil {
		return err
	}
	var brokers []*Broker
	var initial []string
	for i := range Size {
		b := &Broker{
			ID:              int32(i + 1),
			AZ:              string(rune('a' + i)),
			KafkaAddr:       ports[perBroker*i],
			HTTPAddr:        ports[perBroker*i+1],
			InterBrokerAddr: ports[perBroker*i+2],
			DataDir:         dataDir(c.cfg.Dir, int32(i+1)),
			LogPath:         filepath.Join(c.cfg.Dir, fmt.Sprintf("n%d", i+1), "sluiced.log"),
		}
		if c.cfg.Tenants {
			b.SASLAddr = ports[perBroker*i+perBroker-1]
		}
		if c.etcd == nil {
			b.EtcdClientAddr, b.EtcdPeerAddr = ports[perBroker*i+3], ports[perBroker*i+4]
			initial = append(initial, fmt.Sprintf("%d=http://%s", b.ID, b.EtcdPeerAddr))
		}
		// A failed attempt's etcd member knows the old peers, and its
		// data dir the old cluster: start afresh. The dir itself stays,
		// for it may be a tmpfs mount point.
		if err := emptyDir(b.DataDir); err != nil {
			return fmt.Errorf("chaos/cluster: clear data dir: %w", err)
		}
		brokers = append(brokers, b)
	}
	env := c.s3.info.ChildEnv()
	if err := c.makeMesh(brokers); err != nil {
		return err
	}
	for _, b := range brokers {
		b.proc = &process{
			name:    fmt.Sprintf("broker %d", b.ID),
			path:    c.cfg.Sluiced,
			args:    append(c.brokerArgs(b, strings.Join(initial, ",")), c.peerArgs(b)...),
			env:     env,
			logPath: b.LogPath,
			spawn:   c.spawn,
		}
	}
	c.brokers = brokers
	return nil
}

func (c *Cluster) brokerArgs(b *Broker, initialCluster string) []string {
	args := []string{
		"--node-id", strconv.Itoa(int(b.ID)),
		"--az", b.AZ,
		"--data-dir", b.DataDir,
		"--http-listen", b.HTTPAddr,
		"--inter-broker-listen", b.InterBrokerAddr,
	}
	if c.cfg.Tenants {
		listeners := "PLAINTEXT://" + b.KafkaAddr + ",SASL_PLAINTEXT://" + b.SASLAddr
		args = append(args, "--listeners", listeners, "--advertised-listeners", listeners,
			"--security", "--allow-everyone-if-no-acl-found",
			"--admin-password-file", c.adminPasswordFile())
	} else {
		args = append(args, "--kafka-listen", b.KafkaAddr, "--kafka-advertise", b.KafkaAddr)
	}
	if c.etcd != nil {
		args = append(args, "--etcd-endpoints", c.etcd.endpoint(b.ID))
	} else {
		args = append(args,
			"--etcd-listen-client", b.EtcdClientAddr,
			"--etcd-listen-peer", b.EtcdPeerAddr,
			"--etcd-initial-cluster", initialCluster)
	}
	args = append(args,
		"--object-store", c.objectStoreURL(),
		"--registration-ttl", c.cfg.RegistrationTTL.String(),
		"--controller-ttl", c.cfg.ControllerTTL.String(),
		"--retention-check-interval", "200ms",
		"--log-level", c.cfg.LogLevel)
	args = append(args, c.cfg.ExtraArgs...)
	if c.cfg.BrokerArgs != nil {
		args = append(args, c.cfg.BrokerArgs(b.ID)...)
	}
	return args
}

// makeMesh puts a proxy in front of every broker's inter-broker listener
// (replica fetches and replication messages) for each other broker, with Config.PeerMesh (replacing the mesh of an
// earlier attempt).
func (c *Cluster) makeMesh(brokers []*Broker) error {
	if !c.cfg.PeerMesh {
		return nil
	}
	if c.mesh != nil {
		_ = c.mesh.Close()
	}
	var eps []netproxy.Endpoint
	var sources []string
	for _, b := range brokers {
		node := NodeName(b.ID)
		sources = append(sources, node)
		eps = append(eps, netproxy.Endpoint{Name: node + "-inter", Node: node, Addr: b.InterBrokerAddr})
	}
	m, err := netproxy.NewMesh(netproxy.MeshConfig{Endpoints: eps, Sources: sources, Logger: c.log})
	if err != nil {
		return fmt.Errorf("chaos/cluster: peer mesh: %w", err)
	}
	c.mesh = m
	return nil
}

// peerArgs routes b's links to the other brokers through the mesh.
func (c *Cluster) peerArgs(b *Broker) []string {
	if c.mesh == nil {
		return nil
	}
	var peers []string
	for id := int32(1); id <= Size; id++ {
		if id == b.ID {
			continue
		}
		addr, _ := c.mesh.Addr(NodeName(b.ID), NodeName(id)+"-inter")
		peers = append(peers, fmt.Sprintf("%d=%s", id, addr))
	}
	return []string{"--peer-inter-broker", strings.Join(peers, ",")}
}

// objectStoreURL is the brokers' --object-store: through the S3 proxy, or
// else the S3 fault proxy, when there is one.
func (c *Cluster) objectStoreURL() string {
	info := c.s3.info
	switch {
	case c.s3proxy != nil:
		info.Endpoint = "http://" + c.s3proxy.Addr()
	case c.s3fault != nil:
		info.Endpoint = c.s3fault.URL()
	}
	return info.URL()
}

// S3Faults is the S3 protocol fault proxy in front of the gateway (nil
// without Config.S3Faults).
func (c *Cluster) S3Faults() *s3fault.Proxy { return c.s3fault }

// EtcdEndpoints is a client URL of the cluster's etcd that bypasses every
// proxy, for tools run by the caller (tierctl): the cluster's own server
// with Config.ExternalEtcd, else the brokers' embedded members, comma
// separated.
func (c *Cluster) EtcdEndpoints() string {
	if c.etcd != nil {
		return "http://" + c.etcd.addr
	}
	urls := make([]string, 0, len(c.brokers))
	for _, b := range c.brokers {
		urls = append(urls, "http://"+b.EtcdClientAddr)
	}
	return strings.Join(urls, ",")
}

// S3Proxy is the proxy between the brokers and the S3 gateway (nil without
// Config.S3Proxy).
func (c *Cluster) S3Proxy() *netproxy.Proxy { return c.s3proxy }

// NodeName is a broker's node name in the peer mesh: "b1", "b2", "b3".
func NodeName(id int32) string { return fmt.Sprintf("b%d", id) }

// Mesh is the peer mesh (nil without Config.PeerMesh): partition, delay or
// cut broker-to-broker links with it.
func (c *Cluster) Mesh() *netproxy.Mesh { return c.mesh }

// ChildEnv is the environment of a process that should reach the bucket
// as the brokers do (a broker, or a tool such as tierctl): the parent's
// environment without its AWS_* variables, plus the cluster's credentials.
func (s S3) ChildEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	return append(env, s.env()...)
}

// freePorts returns n distinct loopback addresses that were free a moment
// ago.
func freePorts(n int) ([]string, error) {
	var addrs []string
	for range n {
		a, err := freeport.Addr()
		if err != nil {
			return nil, fmt.Errorf("chaos/cluster: pick a free port: %w", err)
		}
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// launchAll starts the given brokers (all, if none given) and then waits
// until each is ready: the etcd members wait for each other's quorum, so
// none is waited for before all run.
func (c *Cluster) launchAll(ctx context.Context, bs ...*Broker) error {
	if len(bs) == 0 {
		bs = c.brokers
	}
	for _, b := range bs {
		if err := b.proc.start(); err != nil {
			return err
		}
		c.log.Info().Int32("broker", b.ID).Int("pid", b.PID()).Msg("started")
	}
	for _, b := range bs {
		if err := c.waitReady(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// waitReady polls b's /readyz until it answers 200.
func (c *Cluster) waitReady(ctx context.Context, b *Broker) error {
	r := b.proc.current()
	err := poll(ctx, c.cfg.ReadyTimeout, r.exited, func(ctx context.Context) error { return c.readyz(ctx, b) })
	if err != nil {
		return b.proc.withLatestTail(fmt.Errorf("broker %d: %w", b.ID, err))
	}
	c.log.Info().Int32("broker", b.ID).Msg("ready")
	return nil
}

// enter begins an operation; the caller calls c.life.RUnlock when it ends.
func (c *Cluster) enter() error {
	c.life.RLock()
	if c.stopped {
		c.life.RUnlock()
		return ErrStopped
	}
	return nil
}

// broker is the broker with node id id.
func (c *Cluster) broker(id int32) (*Broker, error) {
	if id < 1 || int(id) > len(c.brokers) {
		return nil, fmt.Errorf("chaos/cluster: no broker %d (ids are 1 to %d)", id, len(c.brokers))
	}
	return c.brokers[id-1], nil
}

// Broker is the broker with node id id (1 to Size), or nil.
func (c *Cluster) Broker(id int32) *Broker {
	b, err := c.broker(id)
	if err != nil {
		return nil
	}
	return b
}

// Bootstrap is every broker's Kafka address, for a client's seed brokers.
func (c *Cluster) Bootstrap() []string {
	var out []string
	for _, b := range c.brokers {
		out = append(out, b.KafkaAddr)
	}
	return out
}

// UnexpectedExits lists every exit of a broker or of the S3 gateway that
// the Cluster did not cause (a crash, a failed start or restart), each with
// the end of that run's log: in a chaos run, a finding.
func (c *Cluster) UnexpectedExits() []error {
	var out []error
	for _, b := range c.brokers {
		out = append(out, b.proc.unexpectedExits()...)
	}
	if c.s3 != nil {
		out = append(out, c.s3.proc.unexpectedExits()...)
	}
	return out
}

// S3 describes the object store the brokers share.
func (c *Cluster) S3() S3 { return c.s3.info }

// Up lists the brokers that run and are not paused, by id.
func (c *Cluster) Up() []int32 {
	var out []int32
	for _, b := range c.brokers {
		if b.proc.up() {
			out = append(out, b.ID)
		}
	}
	return out
}

// Kill sends SIGKILL to broker id (paused or not) and waits until it is
// gone.
func (c *Cluster) Kill(id int32) error {
	return c.each([]int32{id}, "kill", func(b *Broker) error { return b.proc.kill() })
}

// Pause freezes broker id with SIGSTOP: the process, its etcd member
// included, stops with its sockets open, so peers see it hang, not go.
func (c *Cluster) Pause(id int32) error {
	return c.each([]int32{id}, "pause", func(b *Broker) error { return b.proc.signal(syscall.SIGSTOP) })
}

// Resume sends SIGCONT to broker id.
func (c *Cluster) Resume(id int32) error {
	return c.each([]int32{id}, "resume", func(b *Broker) error { return b.proc.signal(syscall.SIGCONT) })
}

// each runs op on each broker of ids within an operation, and logs it.
func (c *Cluster) each(ids []int32, what string, op func(*Broker) error) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.life.RUnlock()
	var errs []error
	for _, id := range ids {
		b, err := c.broker(id)
		if err == nil {
			pid := b.PID()
			err = op(b)
			c.log.Info().Int32("broker", id).Int("pid", pid).Err(err).Msg(what)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("chaos/cluster: %s broker %d: %w", what, id, err))
		}
	}
	return errors.Join(errs...)
}

// Restart starts broker id again, after a Kill or a crash, with the same
// arguments, data dir and ports, and waits until it answers /readyz.
func (c *Cluster) Restart(ctx context.Context, id int32) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.life.RUnlock()
	b, err := c.broker(id)
	if err != nil {
		return err
	}
	if err := c.launchAll(ctx, b); err != nil {
		return fmt.Errorf("chaos/cluster: restart broker %d: %w", id, err)
	}
	return nil
}

// KillAll sends SIGKILL to every running broker at once, then waits until
// all are gone.
func (c *Cluster) KillAll() error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.life.RUnlock()
	var runs []*run
	var errs []error
	for _, b := range c.brokers {
		if !b.proc.running() {
			continue
		}
		r, err := b.proc.sendKill()
		if err != nil {
			if !errors.Is(err, errNotRunning) {
				errs = append(errs, fmt.Errorf("chaos/cluster: kill broker %d: %w", b.ID, err))
			}
			continue
		}
		runs = append(runs, r)
	}
	for _, r := range runs {
		<-r.exited
	}
	c.log.Info().Int("killed", len(runs)).Msg("kill all")
	return errors.Join(errs...)
}

// RestartAll starts every broker that is not running at once, and waits
// until each answers /readyz and every broker lists all three and a
// controller.
func (c *Cluster) RestartAll(ctx context.Context) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.life.RUnlock()
	var down []*Broker
	for _, b := range c.brokers {
		if !b.proc.running() {
			down = append(down, b)
		}
	}
	if len(down) > 0 {
		if err := c.launchAll(ctx, down...); err != nil {
			return fmt.Errorf("chaos/cluster: restart all: %w", err)
		}
	}
	if err := poll(ctx, c.cfg.ReadyTimeout, nil, c.formed); err != nil {
		return fmt.Errorf("chaos/cluster: restart all: the brokers did not form a cluster: %w", err)
	}
	return nil
}

// Stop ends the cluster: paused brokers are resumed, every running broker
// gets SIGTERM at once (so no etcd member waits alone for a quorum) and
// SIGKILL after Config.StopTimeout; then the S3 gateway is stopped, the
// proxies and the etcd server are closed and the tmpfs data dirs are
// unmounted (their contents are lost; the brokers' logs are outside). It
// returns what went wrong: a broker that did not exit 0 on SIGTERM, and
// every exit the Cluster did not cause (UnexpectedExits). Calls after the
// first return the first's result.
func (c *Cluster) Stop() error { return c.stop(true) }

func (c *Cluster) stop(withExits bool) error {
	c.life.Lock()
	defer c.life.Unlock()
	if c.stopped {
		return c.stopErr
	}
	c.stopped = true
	errs := make([]error, len(c.brokers))
	var wg sync.WaitGroup
	for i, b := range c.brokers {
		wg.Go(func() { errs[i] = b.proc.terminate(c.cfg.StopTimeout) })
	}
	wg.Wait()
	c.closeClients()
	c.http.CloseIdleConnections()
	if c.mesh != nil {
		_ = c.mesh.Close()
	}
	if c.s3proxy != nil {
		_ = c.s3proxy.Close()
	}
	if c.s3fault != nil {
		_ = c.s3fault.Close()
	}
	if c.s3 != nil {
		_ = c.s3.proc.terminate(c.cfg.StopTimeout) // the gateway's exit status on SIGTERM says nothing
	}
	if c.etcd != nil {
		c.etcd.close()
	}
	// Every broker has exited: nothing holds the mounts but a stray shell.
	errs = append(errs, c.unmountAll())
	c.spawn.close()
	if withExits {
		errs = append(errs, c.UnexpectedExits()...)
	}
	c.stopErr = errors.Join(errs...)
	if c.stopErr != nil {
		c.stopErr = fmt.Errorf("chaos/cluster: stop: %w", c.stopErr)
	}
	c.log.Info().Err(c.stopErr).Msg("stopped")
	return c.stopErr
}
