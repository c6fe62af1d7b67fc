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
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/broker/cluster"

	"github.com/sluice-mq/sluice/broker/httpapi"
	"github.com/sluice-mq/sluice/broker/largeobj"

	"github.com/sluice-mq/sluice/broker/coordinator"
	"github.com/sluice-mq/sluice/broker/kafka"
	"github.com/sluice-mq/sluice/broker/kafka/quotaadmit"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/console"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/broker/security"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/wal/vfs"
)

// Broker is one Sluice server process: its Node (this broker's own state,
// broker/node) and the front ends and cluster roles composed over it.
type Broker struct {
	*node.Node

	*cluster.Cluster // registration, elections, replication between brokers

	coord *coordinator.Coordinator // consumer groups and committed offsets

	kafka   *kafka.Server // the Kafka front end; set by Run
	httpLn  net.Listener
	http    *httpapi.Server // the HTTP front end; set by Run
	ready   atomic.Bool
	readyCh chan struct{} // closed once the broker serves Kafka and HTTP

	kafkaOpts []kafka.Option // the Kafka front end's dependencies (credentials, authoriser, admitter), from New

	largeObjects *largeobj.Service // large payloads (largeobjects.go); set by Run
	console      *console.Console  // the operator console at /ui (console_wire.go); set by Run

	quotas   atomic.Pointer[quota.Table] // every tenant's limits, followed from etcd; set by Run
	quotaSrc quota.Source                // SetQuotas' source of the tenants' quotas; nil: the followed table
}

// Quotas is every tenant's limits and scheduling attributes as this broker
// applies them, followed from etcd (nil before Run has read them).
func (b *Broker) Quotas() *quota.Table { return b.quotas.Load() }

// New checks the configuration and prepares a broker; Run starts it.
// kafkaOpts are passed to the Kafka front end (kafka.New).
func New(cfg Config, logger zerolog.Logger, kafkaOpts ...kafka.Option) (*Broker, error) {
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
	nodeLog := logger.With().Int32("node", cfg.NodeID).Logger()
	n := node.New(cfg, nodeLog)
	if err := n.OpenInterBrokerTLS(); err != nil {
		return nil, err
	}
	b := &Broker{Node: n, Cluster: cluster.New(n), readyCh: make(chan struct{}), kafkaOpts: kafkaOpts}
	b.Hooks.ForgetTopic = func(ctx context.Context, name string, id [16]byte) {
		if b.coord != nil {
			b.coord.ForgetTopic(ctx, name, id)
		}
	}
	return b, nil
}

// Serving reports whether the broker serves Kafka and HTTP (httpapi.Cluster).
func (b *Broker) Serving() bool { return b.ready.Load() }

// LocalInterBrokerAddr is this broker's bound inter-broker address
// (httpapi.Cluster).
func (b *Broker) LocalInterBrokerAddr() string { return b.kafka.InterBrokerAddr() }

// KafkaAddr is the bound Kafka listener address (useful with port 0).
func (b *Broker) KafkaAddr() string {
	return b.kafka.Addr()
}

// Ready is closed once the broker serves Kafka and HTTP requests.
func (b *Broker) Ready() <-chan struct{} { return b.readyCh }

// testHookAfterLoadTopics, set only by tests, runs between the broker's
// loading of its topics and the start of its topic watch.
var testHookAfterLoadTopics func(*Broker)

// Run serves until ctx is cancelled, then shuts down cleanly. It returns the
// first error that stopped the broker, or nil after a requested shutdown.
func (b *Broker) Run(ctx context.Context) error {
	lock, err := b.LockDataDir()
	if err != nil {
		return err
	}
	defer func() {
		if err := lock.Close(); err != nil {
			b.Logger.Warn().Err(err).Msg("release data directory lock")
		}
	}()
	b.Store, err = meta.Open(ctx, b.Cfg.Meta, b.NodeLog)
	if err != nil {
		return fmt.Errorf("broker: open metadata: %w", err)
	}
	defer func() {
		if err := b.Store.Close(); err != nil {
			b.Logger.Warn().Err(err).Msg("close metadata store")
		}
	}()
	if b.ClusterID, err = b.Store.ClusterID(ctx); err != nil {
		return fmt.Errorf("broker: cluster id: %w", err)
	}
	if err := b.CheckDataDir(ctx, b.ClusterID); err != nil {
		return err
	}
	if err := vfs.EmptyTrash(b.FS, b.TrashDir()); err != nil {
		return fmt.Errorf("broker: empty %s: %w", b.TrashDir(), err)
	}

	if err := b.StartTiering(ctx); err != nil {
		return err
	}
	defer b.StopTiering()
	if err := b.startLargeObjects(); err != nil {
		return err
	}
	if err := b.OpenJournal(); err != nil {
		return err
	}
	partCtx, stopPartitions := context.WithCancel(context.WithoutCancel(ctx))
	b.PartCtx = partCtx
	defer func() {
		stopPartitions()
		b.PartWG.Wait()
		b.CloseTopics()
		b.CloseJournal()
	}()
	if err := b.LoadTopics(ctx); err != nil {
		return err
	}
	if testHookAfterLoadTopics != nil {
		testHookAfterLoadTopics(b)
	}
	if b.Journal != nil {
		// Every partition has replayed its records: checkpoints may begin.
		b.Journal.Start()
	}
	if err := b.startCoordinator(ctx); err != nil {
		return err
	}
	defer b.stopCoordinator()

	guard, err := security.Start(ctx, b.Store, security.Config{Enabled: b.Cfg.SecurityEnabled,
		SuperUsers: b.Cfg.SuperUsers, AllowEveryoneIfNoACLFound: b.Cfg.AllowEveryoneIfNoACLFound,
		AdminPasswordFile: b.Cfg.AdminPasswordFile, Logger: b.Logger})
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	defer guard.Close()
	quotas, err := followQuotas(ctx, b.Store, b.NodeLog)
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	defer quotas.close()
	b.quotas.Store(quotas.table)
	if b.quotaSrc == nil {
		b.quotaSrc = quotas.table
	}
	if b.Cfg.Quotas == nil {
		b.Cfg.Quotas = b.quotaSrc // the count, mutation-rate and storage limits (broker/node)
	}
	b.Fair.SetWeight(func(tenant string) float64 {
		w, _ := quotas.table.Scheduling(tenant)
		return w
	})

	// The security Guard decides for both front ends: who a principal is,
	// where SASL finds credentials (unless a test configured its own), and
	// what an identity may do.
	kopts := []kafka.Option{kafka.WithAuthorizer(guard), kafka.WithIdentities(guard.Identity)}
	if b.Cfg.SASLCredentials == nil {
		kopts = append(kopts, kafka.WithCredentials(guard.ScramLookup))
	}
	meters := b.quotaMeters()
	if meters != nil {
		kopts = append(kopts, kafka.WithAdmitter(quotaadmit.New(meters)))
		b.wireDiskLadder(meters, quotas.table)
	}
	b.kafka = kafka.New(b.Node, b, b.coord, append(kopts, b.kafkaOpts...)...)
	b.http = httpapi.New(b.Node, b, b.coord, guard)
	if meters != nil {
		b.http.SetAdmitter(httpapi.NewQuotaAdmitter(meters))
	}
	if b.largeObjects != nil {
		b.http.SetLargeObjects(b.largeObjects)
	}
	if err := b.newConsole(); err != nil {
		return fmt.Errorf("broker: console: %w", err)
	}
	if err := b.kafka.Listen(); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if b.httpLn, err = b.http.Listen(); err != nil {
		b.kafka.CloseListeners()
		return fmt.Errorf("broker: http listener: %w", err)
	}
	// Registered once the listeners are bound, so the addresses the
	// cluster learns already accept connections.
	b.SetAddrs(cluster.Addrs{Kafka: b.kafka.Advertise(), HTTP: b.httpLn.Addr().String(),
		InterBroker: b.kafka.InterBrokerAdvertise(), Listeners: b.kafka.AdvertisedListeners()})
	if err := b.RegisterAtStart(ctx); err != nil {
		b.kafka.CloseListeners()
		_ = b.httpLn.Close()
		return err
	}
	httpSrv := &http.Server{Handler: b.http.Handler(), ReadHeaderTimeout: 10 * time.Second}
	ibSrv := b.interBrokerHTTP()

	serveCtx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	errc := make(chan error, 4)
	go func() { errc <- b.kafka.Serve(serveCtx) }()
	go func() { errc <- b.kafka.ServeInterBroker(serveCtx) }()
	serveHTTP := func(srv *http.Server, ln net.Listener, name string) {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("broker: %s: %w", name, err)
			return
		}
		errc <- nil
	}
	go serveHTTP(httpSrv, b.httpLn, "http")
	go serveHTTP(ibSrv, b.kafka.InterBrokerHTTP(), "inter-broker http")
	clusterCtx, stopCluster := context.WithCancel(context.WithoutCancel(ctx))
	b.StartCluster(clusterCtx)
	defer func() {
		stopCluster()
		b.WaitCluster()
	}()
	var maintWG sync.WaitGroup
	if meters != nil {
		maintWG.Add(1)
		go func() { defer maintWG.Done(); b.quotaSplitLoop(serveCtx, meters) }()
	}
	// Dead-letter redrive jobs; stopped before the lease that fences their
	// claims is revoked.
	redriveCtx, stopRedrive := context.WithCancel(serveCtx)
	redriveDone := make(chan struct{})
	go func() { defer close(redriveDone); b.http.RunRedrives(redriveCtx, b.Registration) }()
	maintWG.Add(5)
	go func() { defer maintWG.Done(); b.consoleLoop(serveCtx) }()
	go func() { defer maintWG.Done(); b.largeObjectSweepLoop(serveCtx) }()
	go func() { defer maintWG.Done(); b.maintainLoop(serveCtx) }()
	go func() { defer maintWG.Done(); b.DiskGuardLoop(serveCtx) }()
	go func() { defer maintWG.Done(); b.ScrubLoop(serveCtx) }()

	if b.Cfg.Canary {
		maintWG.Add(1)
		go func() { defer maintWG.Done(); b.runCanary(serveCtx) }()
	}
	b.AwaitOwnLeadership(ctx, cluster.StartupLeaderWait)
	b.ready.Store(true)
	close(b.readyCh)
	b.Logger.Info().Str("kafka", b.kafka.Addr()).Str("http", b.httpLn.Addr().String()).
		Str("inter_broker", b.kafka.InterBrokerAddr()).Str("cluster_id", b.ClusterID).Msg("broker ready")

	var runErr error
	pending := cap(errc) // the serving goroutines yet to return
	select {
	case <-ctx.Done():
	case runErr = <-errc:
		pending--
	}
	b.ready.Store(false)
	b.Logger.Info().Msg("shutting down")
	stopRedrive()
	<-redriveDone
	deregCtx, cancelDereg := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	b.Deregister(deregCtx)
	cancelDereg()
	stopServing()
	b.kafka.CloseListeners()
	b.http.Close()
	b.kafka.CloseConns()
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := httpSrv.Shutdown(shutCtx); err != nil {
		b.Logger.Warn().Err(err).Msg("http shutdown")
	}
	if err := ibSrv.Shutdown(shutCtx); err != nil {
		b.Logger.Warn().Err(err).Msg("inter-broker http shutdown")
	}
	b.kafka.Wait()
	// Every serving goroutine has returned before Run does, so nothing
	// they touched is still in use when the broker's state is closed.
	// Their errors after the shutdown began are moot.
	for ; pending > 0; pending-- {
		<-errc
	}
	maintWG.Wait()
	return runErr
}

// maintainLoop asks every partition to roll aged segments, then the tiering
// manager to upload and to apply retention (tiering.go).
func (b *Broker) maintainLoop(ctx context.Context) {
	t := time.NewTicker(b.Cfg.RetentionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for _, p := range b.AllPartitions() {
				p.Maintain()
			}
			if b.Tiers != nil {
				b.Tiers.Maintain(ctx, b.TierTargets())
			}
		}
	}
}

// interBrokerHTTP is the listener's HTTP server: the envelope route and the
// internal routes of forwarding and listings.
func (b *Broker) interBrokerHTTP() *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+cluster.ReplicationPath, b.HTTPReplication)
	b.http.RegisterInternal(mux)
	return &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
}
