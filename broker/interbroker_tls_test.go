package broker

// Tests of --inter-broker-security-protocol SSL over real brokers: the
// brokers replicate, elect and forward over mutual TLS with their own
// certificates, and the inter-broker listener refuses a client's
// certificate, a connection without one, and plain TCP.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/cluster"
	"github.com/sluice-mq/sluice/broker/kafka"
	"github.com/sluice-mq/sluice/broker/listener/certgen"
	"github.com/sluice-mq/sluice/broker/replica"
)

// interBrokerPKI is a CA, one certificate per broker (principal
// User:broker-N, server and client usage, IP SAN 127.0.0.1) and a client
// certificate of User:alice, written to files.
type interBrokerPKI struct {
	dir               string
	caFile            string
	aliceCert         tls.Certificate
	brokerCert        tls.Certificate // broker-1's, to dial as a broker would
	pool              *x509.CertPool
	certFile, keyFile func(node int32) string
}

func newInterBrokerPKI(t *testing.T, brokers int) *interBrokerPKI {
	t.Helper()
	dir := t.TempDir()
	ca, err := certgen.NewCA("sluice test CA", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := &interBrokerPKI{dir: dir, caFile: filepath.Join(dir, "ca.crt"), pool: x509.NewCertPool()}
	if err := os.WriteFile(p.caFile, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	p.pool.AddCert(ca.Certificate())
	p.certFile = func(n int32) string { return filepath.Join(dir, fmt.Sprintf("broker-%d.crt", n)) }
	p.keyFile = func(n int32) string { return filepath.Join(dir, fmt.Sprintf("broker-%d.key", n)) }
	localhost := []net.IP{net.IPv4(127, 0, 0, 1)}
	for n := int32(1); n <= int32(brokers); n++ {
		certPEM, keyPEM, err := ca.Issue(fmt.Sprintf("broker-%d", n), nil, localhost, certgen.Both, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p.certFile(n), certPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p.keyFile(n), keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			if p.brokerCert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
				t.Fatal(err)
			}
		}
	}
	certPEM, keyPEM, err := ca.Issue("alice", nil, localhost, certgen.Client, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if p.aliceCert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	return p
}

// configure turns on inter-broker SSL with the node's own certificate.
func (p *interBrokerPKI) configure(cfg *Config) {
	cfg.InterBrokerSecurityProtocol = "SSL"
	cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile = p.certFile(cfg.NodeID), p.keyFile(cfg.NodeID), p.caFile
	cfg.InterBrokerPrincipals = []string{"User:broker-1", "User:broker-2", "User:broker-3"}
}

// clientTLS is a TLS client config trusting the test CA, presenting cert
// (none when nil).
func (p *interBrokerPKI) clientTLS(cert *tls.Certificate) *tls.Config {
	cfg := &tls.Config{RootCAs: p.pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return cfg
}

// refusedConns is the inter-broker listener's refusal counter of b.
func refusedConns(t *testing.T, b *Broker, reason string) float64 {
	t.Helper()
	return metricValue(t, b, "sluice_inter_broker_refused_total", "reason", reason)
}

// TestInterBrokerSSLReplicates: three brokers whose inter-broker links are
// mutual TLS replicate a topic with RF 3 (acks=all, every replica in
// sync), forward an HTTP publish to the leader, elect a new leader when
// the leader stops (election messages over TLS), and serve every record;
// no broker refused another.
func TestInterBrokerSSLReplicates(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	pki := newInterBrokerPKI(t, 3)
	c := startTestClusterWith(t, 3, pki.configure)
	createReplicatedWith(t, c, "ssl", map[string]string{"min.insync.replicas": "3"})
	const n = 50
	produceAll(t, c, "ssl", n)
	eventuallyTrue(t, "every replica in sync", func() (bool, string) {
		md := metadataOf(t, c.brokers[0])
		for _, mt := range md.Topics {
			for _, mp := range mt.Partitions {
				if *mt.Topic == "ssl" && (len(mp.ISR) != 3 || len(mp.Replicas) != 3) {
					return false, fmt.Sprintf("partition %d: replicas %v isr %v", mp.Partition, mp.Replicas, mp.ISR)
				}
			}
		}
		return true, ""
	})
	for _, b := range c.brokers {
		for _, reason := range []string{kafka.RefusePrincipal, kafka.RefuseTLSHandshake} {
			if got := refusedConns(t, b, reason); got != 0 {
				t.Fatalf("broker %d refused %v inter-broker connections (%s) of the brokers themselves", b.Cfg.NodeID, got, reason)
			}
		}
	}

	li := c.leaderOf("ssl", 0)
	if li < 0 {
		t.Fatal("no leader")
	}
	// An HTTP publish through a broker that does not lead the partition is
	// forwarded by its producer over the leader's inter-broker listener.
	https := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: pki.clientTLS(nil)}}
	other := c.brokers[(li+1)%3]
	resp, err := https.Post("https://"+other.httpLn.Addr().String()+"/v1/topics/ssl/messages:publish", "application/json",
		strings.NewReader(`{"messages":[{"payload":"forwarded"}]}`))
	if err != nil {
		t.Fatalf("publish through node %d: %v", other.Cfg.NodeID, err)
	}
	raw, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var answer struct {
		Results []struct{ Status string } `json:"results"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil || resp.StatusCode != http.StatusOK ||
		len(answer.Results) != 1 || answer.Results[0].Status != "ok" {
		t.Fatalf("publish through node %d: %d %s", other.Cfg.NodeID, resp.StatusCode, raw)
	}

	// The leader stops: the others elect over TLS and serve every record.
	c.stops[li]()
	var rest []string
	for i, b := range c.brokers {
		if i != li {
			rest = append(rest, b.KafkaAddr())
		}
	}
	eventuallyTrue(t, "a new leader", func() (bool, string) {
		md := metadataOf(t, c.brokers[(li+1)%3])
		for _, mt := range md.Topics {
			if *mt.Topic == "ssl" {
				l := mt.Partitions[0].Leader
				return l >= 0 && l != int32(li+1), fmt.Sprintf("leader %d", l)
			}
		}
		return false, "no topic"
	})
	cons, err := kgo.NewClient(kgo.SeedBrokers(rest...), kgo.ConsumeTopics("ssl"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	// A new leader serves up to its high watermark, which moves past the
	// last record only once the remaining follower has fetched in the new
	// epoch: on a loaded machine that can take a while.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for len(seen) < n+1 && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	if len(seen) != n+1 || !seen["forwarded"] {
		// Say where each surviving replica's log and high watermark are,
		// so a failure tells a lost record from a watermark that lags.
		var where []string
		for i, b := range c.brokers {
			if i == li {
				continue
			}
			if td := b.LookupTopic("ssl"); td != nil && len(td.Partitions) > 0 && td.Partitions[0] != nil {
				p := td.Partitions[0]
				hw, _ := p.HighWatermark()
				where = append(where, fmt.Sprintf("node %d: log end %d, durable %d, hw %d, epoch %d",
					b.Cfg.NodeID, p.Log().EndOffset(), p.Log().DurableEnd(), hw, p.LeaderEpoch()))
			}
		}
		t.Fatalf("read back %d of %d after the leader stopped (forwarded one: %v); %s", len(seen), n+1, seen["forwarded"], strings.Join(where, "; "))
	}
}

// TestInterBrokerSSLRefusesOthers: on the inter-broker listener, a client
// with a valid certificate of a principal that is no broker's cannot send
// a replica Fetch or POST an election envelope (the connection is closed
// after the handshake, counted and logged); a connection without a client
// certificate, or without TLS, fails the handshake. A broker's certificate
// is served.
func TestInterBrokerSSLRefusesOthers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	pki := newInterBrokerPKI(t, 3)
	c := startTestClusterWith(t, 3, pki.configure)
	createReplicatedWith(t, c, "guarded", nil)
	produceAll(t, c, "guarded", 1)
	li := c.leaderOf("guarded", 0)
	if li < 0 {
		t.Fatal("no leader")
	}
	leader := c.brokers[li]
	addr := leader.kafka.InterBrokerAdvertise()
	tp := leader.LookupTopic("guarded")
	follower := leader.Brokers()[0]
	if follower.NodeID == leader.Cfg.NodeID {
		follower = leader.Brokers()[1]
	}
	fetch := replicaFetch(tp, follower.NodeID, follower.Incarnation, -1, 0, -1)

	// alice's certificate is valid (the CA signed it) but not a broker's.
	before := refusedConns(t, leader, kafka.RefusePrincipal)
	alice, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0),
		kgo.DialTLSConfig(pki.clientTLS(&pki.aliceCert)))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := alice.SeedBrokers()[0].Request(ctx, fetch); err == nil {
		t.Fatalf("alice's replica fetch on the inter-broker listener was answered: %+v", resp)
	}
	eventuallyTrue(t, "alice's fetch counted", func() (bool, string) {
		got := refusedConns(t, leader, kafka.RefusePrincipal)
		return got > before, fmt.Sprintf("%v refused, %v before", got, before)
	})
	before = refusedConns(t, leader, kafka.RefusePrincipal)
	body, err := json.Marshal([]replica.Envelope{})
	if err != nil {
		t.Fatal(err)
	}
	aliceHTTP := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: pki.clientTLS(&pki.aliceCert)}}
	if resp, err := aliceHTTP.Post("https://"+addr+cluster.ReplicationPath, "application/json", bytes.NewReader(body)); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("alice's envelope POST on the inter-broker listener answered %d", resp.StatusCode)
	}
	eventuallyTrue(t, "alice's POST counted", func() (bool, string) {
		got := refusedConns(t, leader, kafka.RefusePrincipal)
		return got > before, fmt.Sprintf("%v refused, %v before", got, before)
	})

	// No client certificate: the handshake fails (under TLS 1.3 the client
	// learns it at its first read).
	before = refusedConns(t, leader, kafka.RefuseTLSHandshake)
	if err := tlsExchange(addr, pki.clientTLS(nil)); err == nil {
		t.Fatal("a TLS connection without a client certificate was served")
	}
	// Plain TCP, as a PLAINTEXT broker would dial: refused too.
	if err := plainExchange(addr); err == nil {
		t.Fatal("a plaintext connection was served")
	}
	eventuallyTrue(t, "both handshakes counted", func() (bool, string) {
		got := refusedConns(t, leader, kafka.RefuseTLSHandshake)
		return got >= before+2, fmt.Sprintf("%v refused, %v before", got, before)
	})

	// The same requests with a broker's certificate are served: the
	// listener refused the principal, not the request.
	asBroker := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: pki.clientTLS(&pki.brokerCert)}}
	resp, err := asBroker.Post("https://"+addr+cluster.ReplicationPath, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("a broker's envelope POST: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("a broker's envelope POST answered %d, want 204", resp.StatusCode)
	}
}

// tlsExchange completes a TLS handshake with addr and sends an
// ApiVersions request; nil only if an answer comes back.
func tlsExchange(addr string, cfg *tls.Config) error {
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	return exchange(nc)
}

// plainExchange sends an ApiVersions request over plain TCP.
func plainExchange(addr string) error {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	return exchange(nc)
}

func exchange(nc net.Conn) error {
	defer func() { _ = nc.Close() }()
	_ = nc.SetDeadline(time.Now().Add(15 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	body := req.AppendTo(nil)
	frame := []byte{0, 0, 0, 0}
	frame = append(frame, 0, 18, 0, 0, 0, 0, 0, 1, 0, 0) // key 18 v0, correlation id 1, no client id
	frame = append(frame, body...)
	size := len(frame) - 4
	frame[0], frame[1], frame[2], frame[3] = byte(size>>24), byte(size>>16), byte(size>>8), byte(size)
	if _, err := nc.Write(frame); err != nil {
		return err
	}
	var head [4]byte
	if _, err := io.ReadFull(nc, head[:]); err != nil {
		return err
	}
	if head == [4]byte{} {
		return errors.New("empty answer")
	}
	return nil
}
