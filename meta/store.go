package meta

// This file owns the Store's lifecycle: starting or dialing etcd, checking
// the layout version, the cluster id, and Close.
//
// Invariant: the layout key and the cluster id are each written at most once
// (create-only transactions) and never change afterwards, so they may be
// cached after the first read.
// Invariant: Close stops the Store's goroutines before closing the client,
// and closes the client before stopping the embedded server.
//
// Store.mu guards closed, done-closing and clusterID; everything else in
// Store is immutable after Open.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// layoutVersion is the version of the key layout drawn in doc.go.
const layoutVersion = 1

// Embedded etcd tunables for a small deployment: a few brokers, metadata in
// the tens of megabytes.
const (
	etcdSnapshotCount     = 10_000
	etcdQuotaBackendBytes = 2 << 30 // etcd's own default, stated explicitly
	etcdCompactionMode    = "periodic"
	etcdCompactionEvery   = "1h"
	etcdClusterToken      = "sluice"
	dialTimeout           = 5 * time.Second
)

// Store is the handle on Sluice's metadata in etcd. Safe for concurrent use.
type Store struct {
	log       zerolog.Logger
	prefix    string
	maxTxnOps int           // operations one etcd transaction may carry
	stopping  atomic.Bool   // set by Close: etcd's shutdown noise is logged at debug
	warnings  *etcdWarnings // etcd's repeated warnings, summarised (etcdlog.go)
	client    *clientv3.Client
	etcd      *embed.Etcd // nil when connected to external endpoints

	done     chan struct{}  // closed by Close: stops watchers
	watchers sync.WaitGroup // topic watchers; waited for before the client closes
	bg       sync.WaitGroup // the embedded server's error logger (ends when the server stops) and the warning summaries (end with done)

	counters counterLocks // upload_bytes.go: one writer of a tenant's counter at a time in this process

	mu        sync.Mutex
	closed    bool   // guarded by mu
	clusterID string // guarded by mu; "" until first read
}

// Open starts an embedded etcd member (or dials cfg.Endpoints) and returns
// once the store can serve reads and writes. The wait is bounded by ctx and
// cfg.StartTimeout; a port in use or any other start failure is returned
// with the etcd error wrapped.
func Open(ctx context.Context, cfg Config, log zerolog.Logger) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()

	s := &Store{
		log:       log.With().Str("component", "meta").Logger(),
		prefix:    cfg.Prefix,
		maxTxnOps: cfg.MaxTxnOps,
		done:      make(chan struct{}),
	}
	if s.maxTxnOps == 0 {
		s.maxTxnOps = DefaultMaxTxnOps
		if len(cfg.Endpoints) == 0 {
			s.maxTxnOps = EmbeddedMaxTxnOps
		}
	}
	zlog, warnings := newEtcdLogger(log, &s.stopping)
	s.warnings = warnings
	endpoints := cfg.Endpoints
	// Read the TLS and password files before starting anything, so a
	// mistake names its file.
	clientCfg, err := cfg.clientConfig(endpoints, zlog)
	if err != nil {
		warnings.flush(true)
		return nil, err
	}
	if err := cfg.checkPeerFiles(); err != nil {
		warnings.flush(true)
		return nil, err
	}
	if len(endpoints) == 0 {
		e, err := startEmbedded(ctx, cfg, zlog)
		if err != nil {
			warnings.flush(true)
			return nil, err
		}
		s.etcd = e
		endpoints = []string{localClientURL(e, cfg.clientTLSServed())}
		clientCfg.Endpoints = endpoints // TLS already set: CertFile is given
		s.bg.Add(1)
		go s.logEmbeddedErrors(e)
	}
	s.bg.Add(1)
	go s.summariseEtcdWarnings()
	client, err := clientv3.New(clientCfg)
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("meta: etcd client for %v: %w", endpoints, err)
	}
	s.client = client
	if err := waitReachable(ctx, client, s.prefix+"layout"); err != nil {
		_ = s.Close()
		return nil, err
	}
	if err := s.ensureLayout(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	ev := s.log.Info().Strs("endpoints", endpoints).Bool("embedded", s.etcd != nil).Bool("tls", clientCfg.TLS != nil)
	if cfg.Username != "" {
		ev = ev.Str("etcd_user", cfg.Username) // the user, never the password
	}
	ev.Msg("metadata store open")
	return s, nil
}

// startEmbedded starts the embedded member and waits until it is ready.
func startEmbedded(ctx context.Context, cfg Config, zlog *zap.Logger) (*embed.Etcd, error) {
	ec, err := embedConfig(cfg, zlog)
	if err != nil {
		return nil, err
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("meta: start embedded etcd (client %s, peer %s): %w", cfg.ListenClient, cfg.ListenPeer, err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("meta: embedded etcd failed while starting: %w", err)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("meta: waiting for embedded etcd to become ready (initial cluster %s): %w", cfg.initialCluster(), ctx.Err())
	}
}

// embedConfig translates cfg into etcd's configuration.
func embedConfig(cfg Config, zlog *zap.Logger) (*embed.Config, error) {
	peerURLs, err := cfg.advertisePeerURLs()
	if err != nil {
		return nil, err
	}
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.etcdDir()
	ec.Logger = "zap"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zlog)
	ec.ListenClientUrls = []url.URL{cfg.clientURL(cfg.ListenClient)}
	ec.AdvertiseClientUrls = []url.URL{cfg.advertiseClientURL(peerURLs[0])}
	ec.ListenPeerUrls = []url.URL{cfg.peerURL(cfg.ListenPeer)}
	cfg.embedTLS(ec)
	ec.AdvertisePeerUrls = peerURLs
	ec.InitialCluster = cfg.initialCluster()
	ec.InitialClusterToken = etcdClusterToken
	// "new" only matters on the first start; a member with data restarts from it.
	ec.ClusterState = embed.ClusterStateFlagNew
	ec.SnapshotCount = etcdSnapshotCount
	ec.MaxTxnOps = EmbeddedMaxTxnOps
	ec.QuotaBackendBytes = etcdQuotaBackendBytes
	ec.AutoCompactionMode = etcdCompactionMode
	ec.AutoCompactionRetention = etcdCompactionEvery
	// NewConfig leaves the unary-request threshold at 0, which makes every
	// request "slow" and logs a "request stats" warning per offset commit.
	ec.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	// Metrics stay on the client port (no extra listener); no HTTP/JSON gateway, no pprof.
	ec.ListenMetricsUrls = nil
	ec.EnablePprof = false
	ec.EnableGRPCGateway = false
	return ec, nil
}

// localClientURL is a URL this process can dial to reach e's first client
// listener, even when it listens on an unspecified address.
func localClientURL(e *embed.Etcd, secure bool) string {
	addr := e.Clients[0].Addr().String()
	host, port, err := net.SplitHostPort(addr)
	if err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
	}
	if secure {
		return "https://" + addr
	}
	return "http://" + addr
}

// logEmbeddedErrors logs the embedded server's errors until Close stops it
// (etcd closes the channel when it has stopped).
func (s *Store) logEmbeddedErrors(e *embed.Etcd) {
	defer s.bg.Done()
	for err := range e.Err() {
		if err != nil {
			s.log.Error().Err(err).Msg("embedded etcd error")
		}
	}
}

// summariseEtcdWarnings writes the counts of etcd's repeated warnings as
// their windows end, until Close.
func (s *Store) summariseEtcdWarnings() {
	defer s.bg.Done()
	t := time.NewTicker(s.warnings.window / 6)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			s.warnings.flush(false)
		}
	}
}

// ensureLayout writes the layout version on first use and refuses a newer
// one. A new layout has no upload records, so it is written with the mark
// that the upload byte counters are complete (upload_bytes.go).
func (s *Store) ensureLayout(ctx context.Context) error {
	key := s.prefix + "layout"
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, strconv.Itoa(layoutVersion)), clientv3.OpPut(s.uploadBytesCountedKey(), "0")).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return fmt.Errorf("meta: check layout version: %w", err)
	}
	val := strconv.Itoa(layoutVersion)
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) != 1 {
			return fmt.Errorf("meta: %s present but unreadable: %w", key, ErrCorrupt)
		}
		val = string(kvs[0].Value)
	}
	v, err := strconv.Atoi(val)
	switch {
	case err != nil || v <= 0:
		return fmt.Errorf("meta: layout version %q under %s: %w", val, s.prefix, ErrCorrupt)
	case v > layoutVersion:
		return fmt.Errorf("meta: layout version %d under %s, this build knows %d: %w", v, s.prefix, layoutVersion, ErrUnknownVersion)
	}
	return nil
}

// createOnce stores val under key unless the key exists, and returns the
// value the key holds afterwards.
func (s *Store) createOnce(ctx context.Context, key, val string) (string, error) {
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, val)).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return "", err
	}
	if resp.Succeeded {
		return val, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) != 1 {
		// Deleted between compare and get cannot happen inside one txn.
		return "", fmt.Errorf("meta: %s present but unreadable: %w", key, ErrCorrupt)
	}
	return string(kvs[0].Value), nil
}

// Client is the etcd client, for the parts of the control plane that build
// on etcd primitives directly (leases, elections). Keys must stay under the
// layout in doc.go.
func (s *Store) Client() *clientv3.Client { return s.client }

// Prefix is the key prefix every key of this store lives under.
func (s *Store) Prefix() string { return s.prefix }

// ClusterID returns the cluster id, creating it on first use: 22 characters
// of base64url over a random UUID, as Kafka formats cluster ids. Every
// broker of a cluster sees the same id.
func (s *Store) ClusterID(ctx context.Context) (string, error) {
	s.mu.Lock()
	id := s.clusterID
	s.mu.Unlock()
	if id != "" {
		return id, nil
	}
	id, err := s.createOnce(ctx, s.prefix+"cluster/id", kafkaUUIDString(newKafkaUUID()))
	if err != nil {
		return "", fmt.Errorf("meta: cluster id: %w", err)
	}
	if len(id) != 22 {
		return "", fmt.Errorf("meta: cluster id %q: %w", id, ErrCorrupt)
	}
	s.mu.Lock()
	s.clusterID = id
	s.mu.Unlock()
	return id, nil
}

// Close stops watchers, closes the client and stops the embedded server.
// It is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	s.watchers.Wait()

	var errs []error
	if s.client != nil {
		if err := s.client.Close(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("meta: close etcd client: %w", err))
		}
	}
	s.stopping.Store(true)
	s.stopEmbedded()
	s.bg.Wait()
	s.warnings.flush(true)
	s.log.Info().Msg("metadata store closed")
	return errors.Join(errs...)
}

// stopEmbedded stops the embedded server, if any, and waits for it.
func (s *Store) stopEmbedded() {
	if s.etcd == nil {
		return
	}
	s.etcd.Close()
	<-s.etcd.Server.StopNotify()
}

// newKafkaUUID returns a random UUID that Kafka would also generate: never
// zero, never one whose base64 form starts with '-' (confusable with a flag).
func newKafkaUUID() uuid.UUID {
	for {
		id := uuid.New()
		if id != uuid.Nil && kafkaUUIDString(id)[0] != '-' {
			return id
		}
	}
}

// kafkaUUIDString is Kafka's text form of a UUID: unpadded base64url.
func kafkaUUIDString(id uuid.UUID) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}
