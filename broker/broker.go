package broker

// This file owns the Broker's lifecycle: opening the metadata store and the
// partitions, serving Kafka, HTTP and the inter-broker listener
// (interbroker.go), and shutting everything down in order.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/cache"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
)

// Broker is one Sluice server process.
type Broker struct {
	cfg    Config
	logger zerolog.Logger
	fs     vfs.FS
	m      *metrics

	// nodeLog is logger without its component=broker: every other
	// component's logger derives from it, as zerolog writes a key given
	// twice twice.
	nodeLog zerolog.Logger

	store     *meta.Store
	clusterID string
	journal   *wal.Journal // the durable point every partition shares; nil with PerPartitionFsync
	coord     *coordinator // consumer groups and committed offsets

	// incarnation of the data directory (datadir.go), set by Run before
	// any partition opens; read-only after.
	incarnation replica.Incarnation

	objects    objstore.Store         // tiering (tiering.go); set in Run before partitions open
	probe      storeProbe             // the object store's readiness (tiering_probe.go)
	diskFull   atomic.Pointer[string] // why produce is refused (diskguard.go); "" or nil: accepted
	restarting sync.Map               // partitionKey → true while restartBehindLeader reopens it
	rcache     *cache.Cache
	tiers      *tier.Manager

	reg         atomic.Pointer[meta.Registration] // set by register before serving; replaced after a lost lease
	liveBrokers atomic.Pointer[[]meta.BrokerInfo] // cluster.go
	controller  atomic.Int32                      // node id of the controller; -1: unknown
	ctlResign   chan struct{}                     // capacity 1: the controller should step aside (isolation.go)
	clusterWG   sync.WaitGroup                    // the cluster watchers
	fetch       fetchers                          // follower fetchers, one per leader (fetcher.go)
	repl        replication                       // replication_transport.go, elector.go
	isr         inSyncState                       // published in-sync sets (isr_publish.go)

	// adminMu serialises topic changes (create, delete, configs, partitions)
	// so that each reads and replaces the registry entry it changes alone.
	adminMu sync.Mutex
	// pendingStates holds partition states the watch delivered for topics
	// (or partitions) not yet registered here, until they are; guarded by
	// adminMu (cluster.go, mergePendingStates).
	pendingStates map[partitionKey]meta.PartitionState

	mu     sync.RWMutex
	topics map[string]*topic   // guarded by mu
	byID   map[[16]byte]*topic // guarded by mu

	lagRates  lagRates      // commit-rate samples for consumer lag
	rrPublish atomic.Uint64 // round-robin partition choice for unkeyed HTTP messages

	pidMu           sync.Mutex
	pidNext, pidEnd int64 // guarded by pidMu: the unused rest of the reserved block

	// partCtx is the parent context of every partition owner.
	partCtx context.Context
	partWG  sync.WaitGroup

	kafkaLn   net.Listener
	advertise string // host:port clients are told; set once the listener is bound
	httpLn    net.Listener
	ib        interBroker // the inter-broker listener (interbroker.go)
	fwd       forwarder   // clients of the other brokers' inter-broker listeners (forward.go)
	ready     atomic.Bool
	readyCh   chan struct{} // closed once the broker serves Kafka and HTTP
	conns     sync.WaitGroup
	connMu    sync.Mutex
	openConns map[net.Conn]struct{} // guarded by connMu
}

// New checks the configuration and prepares a broker; Run starts it.
func New(cfg Config, logger zerolog.Logger) (*Broker, error) {
	if cfg.KafkaAdvertise == "" {
		cfg.KafkaAdvertise = cfg.KafkaListen
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Meta.DataDir == "" {
		cfg.Meta.DataDir = cfg.DataDir
	}
	if cfg.Meta.Name == "" {
		cfg.Meta.Name = fmt.Sprint(cfg.NodeID)
	}
	fs := cfg.FS
	if fs == nil {
		fs = vfs.OS
	}
	nodeLog := logger.With().Int32("node", cfg.NodeID).Logger()
	return &Broker{
		cfg:           cfg,
		logger:        nodeLog.With().Str("component", "broker").Logger(),
		nodeLog:       nodeLog,
		fs:            fs,
		m:             newMetrics(),
		topics:        make(map[string]*topic),
		byID:          make(map[[16]byte]*topic),
		openConns:     make(map[net.Conn]struct{}),
		pendingStates: make(map[partitionKey]meta.PartitionState),
		readyCh:       make(chan struct{}),
		ctlResign:     make(chan struct{}, 1),
	}, nil
}

// KafkaAddr is the bound Kafka listener address (useful with port 0).
func (b *Broker) KafkaAddr() string {
	if b.kafkaLn == nil {
		return ""
	}
	return b.kafkaLn.Addr().String()
}

// Ready is closed once the broker serves Kafka and HTTP requests.
func (b *Broker) Ready() <-chan struct{} { return b.readyCh }

// Run serves until ctx is cancelled, then shuts down cleanly. It returns the
// first error that stopped the broker, or nil after a requested shutdown.
func (b *Broker) Run(ctx context.Context) error {
	lock, err := b.lockDataDir()
	if err != nil {
		return err
	}
	defer func() {
		if err := lock.Close(); err != nil {
			b.logger.Warn().Err(err).Msg("release data directory lock")
		}
	}()
	b.store, err = meta.Open(ctx, b.cfg.Meta, b.nodeLog)
	if err != nil {
		return fmt.Errorf("broker: open metadata: %w", err)
	}
	defer func() {
		if err := b.store.Close(); err != nil {
			b.logger.Warn().Err(err).Msg("close metadata store")
		}
	}()
	if b.clusterID, err = b.store.ClusterID(ctx); err != nil {
		return fmt.Errorf("broker: cluster id: %w", err)
	}
	if err := b.checkDataDir(ctx, b.clusterID); err != nil {
		return err
	}
	if err := vfs.EmptyTrash(b.fs, b.trashDir()); err != nil {
		return fmt.Errorf("broker: empty %s: %w", b.trashDir(), err)
	}

	if err := b.startTiering(ctx); err != nil {
		return err
	}
	defer b.stopTiering()
	if err := b.openJournal(); err != nil {
		return err
	}
	partCtx, stopPartitions := context.WithCancel(context.WithoutCancel(ctx))
	b.partCtx = partCtx
	defer func() {
		stopPartitions()
		b.partWG.Wait()
		b.closeTopics()
		b.closeJournal()
	}()
	if err := b.loadTopics(ctx); err != nil {
		return err
	}
	if b.journal != nil {
		// Every partition has replayed its records: checkpoints may begin.
		b.journal.Start()
	}
	if err := b.startCoordinator(ctx); err != nil {
		return err
	}
	defer b.stopCoordinator()

	if b.kafkaLn, err = net.Listen("tcp", b.cfg.KafkaListen); err != nil {
		return fmt.Errorf("broker: kafka listener: %w", err)
	}
	b.advertise = b.cfg.KafkaAdvertise
	if b.advertise == b.cfg.KafkaListen {
		b.advertise = b.kafkaLn.Addr().String()
	}
	if b.httpLn, err = net.Listen("tcp", b.cfg.HTTPListen); err != nil {
		_ = b.kafkaLn.Close()
		return fmt.Errorf("broker: http listener: %w", err)
	}
	if err := b.listenInterBroker(); err != nil {
		_ = b.kafkaLn.Close()
		_ = b.httpLn.Close()
		return fmt.Errorf("broker: inter-broker listener: %w", err)
	}
	// Registered once the listeners are bound, so the addresses the
	// cluster learns already accept connections.
	if err := b.registerAtStart(ctx); err != nil {
		_ = b.kafkaLn.Close()
		_ = b.httpLn.Close()
		_ = b.ib.ln.Close()
		return err
	}
	httpSrv := &http.Server{Handler: b.httpHandler(), ReadHeaderTimeout: 10 * time.Second}
	ibSrv := b.interBrokerHTTP()

	serveCtx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	errc := make(chan error, 4)
	mem := newRequestMemory(b.cfg.QueuedMaxRequestBytes, b.m.requestMem)
	go func() { errc <- b.serveKafka(serveCtx, mem) }()
	go func() { errc <- b.serveInterBroker(serveCtx, mem) }()
	serveHTTP := func(srv *http.Server, ln net.Listener, name string) {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("broker: %s: %w", name, err)
			return
		}
		errc <- nil
	}
	go serveHTTP(httpSrv, b.httpLn, "http")
	go serveHTTP(ibSrv, b.ib.httpConns, "inter-broker http")
	clusterCtx, stopCluster := context.WithCancel(context.WithoutCancel(ctx))
	b.startCluster(clusterCtx)
	defer func() {
		stopCluster()
		b.clusterWG.Wait()
	}()
	var maintWG sync.WaitGroup
	maintWG.Add(3)
	go func() { defer maintWG.Done(); b.maintainLoop(serveCtx) }()
	go func() { defer maintWG.Done(); b.diskGuardLoop(serveCtx) }()
	go func() { defer maintWG.Done(); b.scrubLoop(serveCtx) }()

	b.awaitOwnLeadership(ctx, startupLeaderWait)
	b.ready.Store(true)
	close(b.readyCh)
	b.logger.Info().Str("kafka", b.kafkaLn.Addr().String()).Str("http", b.httpLn.Addr().String()).
		Str("inter_broker", b.ib.ln.Addr().String()).Str("cluster_id", b.clusterID).Msg("broker ready")

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	b.ready.Store(false)
	b.logger.Info().Msg("shutting down")
	deregCtx, cancelDereg := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	b.deregister(deregCtx)
	cancelDereg()
	stopServing()
	if err := b.kafkaLn.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		b.logger.Warn().Err(err).Msg("kafka listener close")
	}
	if err := b.ib.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		b.logger.Warn().Err(err).Msg("inter-broker listener close")
	}
	b.closeForwarder()
	b.closeConns()
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := httpSrv.Shutdown(shutCtx); err != nil {
		b.logger.Warn().Err(err).Msg("http shutdown")
	}
	if err := ibSrv.Shutdown(shutCtx); err != nil {
		b.logger.Warn().Err(err).Msg("inter-broker http shutdown")
	}
	b.conns.Wait()
	maintWG.Wait()
	return runErr
}

// maintainLoop asks every partition to roll aged segments, then the tiering
// manager to upload and to apply retention (tiering.go).
func (b *Broker) maintainLoop(ctx context.Context) {
	t := time.NewTicker(b.cfg.RetentionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for _, p := range b.allPartitions() {
				p.Maintain()
			}
			if b.tiers != nil {
				b.tiers.Maintain(ctx, b.tierTargets())
			}
		}
	}
}

// snapshotPath is where a partition's producer state is snapshotted. It is
// outside the wal directory, which the wal owns entirely.
func (b *Broker) snapshotPath(id [16]byte, partition int32) string {
	return filepath.Join(b.cfg.DataDir, "state", uuidString(id), fmt.Sprintf("%d.producers", partition))
}

// openJournal opens (and recovers) the broker journal in <data-dir>/journal.
func (b *Broker) openJournal() error {
	if b.cfg.PerPartitionFsync {
		return nil
	}
	jcfg := b.cfg.Journal
	jcfg.ObserveSync = b.m.observeJournalSync
	j, err := wal.OpenJournal(b.fs, filepath.Join(b.cfg.DataDir, "journal"), jcfg, b.nodeLog)
	if err != nil {
		return fmt.Errorf("broker: open journal: %w", err)
	}
	b.journal = j
	return nil
}

// closeJournal closes the journal once every log is closed.
func (b *Broker) closeJournal() {
	if b.journal == nil {
		return
	}
	if err := b.journal.Close(); err != nil {
		b.logger.Warn().Err(err).Msg("close journal")
	}
}

// trashDir is where deleted directories are renamed before their removal,
// so a deletion is durable at once and a crash mid-removal leaves nothing
// that looks like live data; startup empties it.
func (b *Broker) trashDir() string { return filepath.Join(b.cfg.DataDir, "trash") }

func (b *Broker) walDir(id [16]byte, partition int32) string {
	return filepath.Join(b.cfg.DataDir, "wal", uuidString(id), fmt.Sprint(partition))
}
