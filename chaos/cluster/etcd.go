package cluster

// etcd.go owns the cluster's own etcd server (Config.ExternalEtcd): one
// single-member etcd running inside the calling process (etcd's embed
// package), with its data in Dir/etcd/data and its log in Dir/etcd/etcd.log,
// and one chaos/netproxy proxy per broker in front of its client port, so a
// scenario can fault one broker's link to etcd and no other. Its fields are
// fixed once started; Stop closes the proxies, then the server, after the
// brokers have exited.
//
// Invariant: broker N reaches etcd only through proxies[N-1]: it is given
// that proxy's address as its only --etcd-endpoints, and its etcd client
// never learns other endpoints (clientv3 replaces its endpoints with the
// cluster's member list only with AutoSyncInterval > 0, which meta.Open
// leaves at 0).

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sluice-mq/sluice/chaos/netproxy"
)

const (
	etcdName  = "chaos"
	etcdToken = "sluice-chaos"
)

// etcdServer is the cluster's own etcd and the brokers' proxies to it.
type etcdServer struct {
	e       *embed.Etcd
	log     *os.File          // Dir/etcd/etcd.log; closed after e
	addr    string            // the client listener, host:port
	proxies []*netproxy.Proxy // proxies[i] is broker i+1's
}

// startEtcd starts the etcd server on free loopback ports, waits until it
// serves, and puts a proxy in front of it for each broker. A port picked
// free but taken by the time etcd binds it is retried on fresh ports.
func startEtcd(ctx context.Context, cfg Config, log zerolog.Logger) (*etcdServer, error) {
	dir := filepath.Join(cfg.Dir, "etcd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("chaos/cluster: make etcd dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "etcd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("chaos/cluster: open etcd log: %w", err)
	}
	// Writes after Stop closed the file fail quietly: etcd may log while
	// it shuts down.
	zlog := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(f), zapcore.InfoLevel),
		zap.ErrorOutput(zapcore.AddSync(io.Discard)))
	s := &etcdServer{log: f}
	for attempt := 1; ; attempt++ {
		e, addr, err := startEtcdOnce(ctx, cfg, filepath.Join(dir, "data"), zlog)
		if err == nil {
			s.e, s.addr = e, addr
			break
		}
		if attempt < startAttempts && strings.Contains(err.Error(), addrInUse) {
			log.Warn().Int("attempt", attempt).Err(err).Msg("an etcd port picked free was taken; trying fresh ones")
			continue
		}
		_ = f.Close()
		return nil, fmt.Errorf("chaos/cluster: start etcd (attempt %d; log %s): %w", attempt, f.Name(), err)
	}
	for id := int32(1); id <= Size; id++ {
		p, err := netproxy.New(netproxy.Config{Upstream: s.addr, Name: NodeName(id) + "->etcd", Seed: uint64(id), Logger: log})
		if err != nil {
			s.close()
			return nil, fmt.Errorf("chaos/cluster: etcd proxy of broker %d: %w", id, err)
		}
		s.proxies = append(s.proxies, p)
	}
	return s, nil
}

// startEtcdOnce starts a fresh single-member etcd in dataDir and waits
// until it is ready, within cfg.ReadyTimeout.
func startEtcdOnce(ctx context.Context, cfg Config, dataDir string, zlog *zap.Logger) (*embed.Etcd, string, error) {
	// A failed attempt may have begun a member; start afresh.
	if err := os.RemoveAll(dataDir); err != nil {
		return nil, "", fmt.Errorf("clear %s: %w", dataDir, err)
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, "", err
	}
	client, peer := url.URL{Scheme: "http", Host: ports[0]}, url.URL{Scheme: "http", Host: ports[1]}
	ec := embed.NewConfig()
	ec.Name = etcdName
	ec.Dir = dataDir
	ec.Logger = "zap"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zlog)
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.InitialClusterToken = etcdToken
	ec.ClusterState = embed.ClusterStateFlagNew
	// As a broker's embedded member is configured (meta/store.go), except
	// MaxTxnOps: brokers given --etcd-endpoints assume etcd's default.
	ec.AutoCompactionMode = "periodic"
	ec.AutoCompactionRetention = "1h"
	ec.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	ec.ListenMetricsUrls = nil
	ec.EnablePprof = false
	ec.EnableGRPCGateway = false
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, "", fmt.Errorf("client %s, peer %s: %w", client.Host, peer.Host, err)
	}
	timer := time.NewTimer(cfg.ReadyTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
		return e, client.Host, nil
	case err := <-e.Err():
		e.Close()
		return nil, "", fmt.Errorf("failed while starting: %w", err)
	case <-timer.C:
		e.Close()
		return nil, "", fmt.Errorf("not ready within %v", cfg.ReadyTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, "", fmt.Errorf("waiting until ready: %w", ctx.Err())
	}
}

// endpoint is the --etcd-endpoints value of broker id: its proxy's URL.
func (s *etcdServer) endpoint(id int32) string { return "http://" + s.proxies[id-1].Addr() }

// close closes the proxies, then the server, then its log; not twice.
func (s *etcdServer) close() {
	for _, p := range s.proxies {
		_ = p.Close() // closing a proxy cannot fail in a way Stop could act on
	}
	if s.e != nil {
		s.e.Close()
	}
	_ = s.log.Close()
}

// EtcdProxy is the proxy between broker id and the cluster's etcd server
// (nil without Config.ExternalEtcd, or for an unknown id): cut, blackhole,
// stall or delay it, in one direction or both, to fault that broker's link
// to etcd alone. The proxies live as long as the Cluster, so a restarted
// broker dials the same one, faults included.
func (c *Cluster) EtcdProxy(id int32) *netproxy.Proxy {
	if c.etcd == nil || id < 1 || int(id) > len(c.etcd.proxies) {
		return nil
	}
	return c.etcd.proxies[id-1]
}
