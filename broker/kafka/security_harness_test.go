package kafka_test

// A broker over real sockets with every kind of listener, certificates
// from certgen and an in-memory credential store, for the security tests.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/freeport"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker"
	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/sluice-mq/sluice/broker/kafka"
	"github.com/sluice-mq/sluice/broker/listener/certgen"
)

const testTenant = "team-a"

// users is an in-memory credential store: user → password.
type users map[string]string

func (u users) lookup(t testing.TB) auth.CredentialLookup {
	creds := map[[2]string]auth.ScramCredential{}
	for name, pw := range u {
		for _, m := range []string{auth.MechanismScramSHA256, auth.MechanismScramSHA512} {
			c, err := auth.NewScramCredential(m, pw, auth.MinIterations)
			if err != nil {
				t.Fatal(err)
			}
			creds[[2]string{m, name}] = c
		}
	}
	return func(mechanism, user string) (auth.ScramCredential, string, bool) {
		if mechanism == auth.MechanismPlain {
			mechanism = auth.MechanismScramSHA256 // PLAIN checks a password against a SCRAM key
		}
		c, ok := creds[[2]string{mechanism, user}]
		return c, testTenant, ok
	}
}

// pki is a CA and the files of a broker certificate and a client one.
type pki struct {
	dir                 string
	ca                  *certgen.CA
	caFile              string
	certFile, keyFile   string // the broker's
	clientCert, clientK string // CN=client1
	pool                *x509.CertPool
}

func newPKI(t testing.TB) *pki {
	t.Helper()
	dir := t.TempDir()
	ca, err := certgen.NewCA("sluice test CA", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	p := &pki{dir: dir, ca: ca, caFile: filepath.Join(dir, certgen.CACertFile), pool: x509.NewCertPool()}
	p.pool.AddCert(ca.Certificate())
	p.certFile, p.keyFile = p.issue(t, "broker", "localhost", certgen.Both)
	p.clientCert, p.clientK = p.issue(t, "client1", "client1", certgen.Client)
	return p
}

// issue writes a certificate for cn (valid for 127.0.0.1 and dns) as
// <name>.crt and <name>.key.
func (p *pki) issue(t testing.TB, name, cn string, usage certgen.Usage) (certFile, keyFile string) {
	t.Helper()
	certPEM, keyPEM, err := p.ca.Issue(cn, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, usage, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := certgen.WriteFiles(p.dir, name, certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
}

func (p *pki) clientTLS(t testing.TB, withCert bool) *tls.Config {
	cfg := &tls.Config{RootCAs: p.pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if withCert {
		c, err := tls.LoadX509KeyPair(p.clientCert, p.clientK)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg
}

func freeAddr(t testing.TB) string {
	t.Helper()
	return freeport.Must(t)
}

// secureBroker is a running broker and the address of each listener.
type secureBroker struct {
	*broker.Broker
	addr map[string]string // listener name → 127.0.0.1:port
	pki  *pki
}

// startSecureBroker runs a broker with PLAINTEXT, SSL (mutual TLS),
// SASL_PLAINTEXT and SASL_SSL listeners.
func startSecureBroker(t testing.TB, mutate func(*broker.Config), opts ...kafka.Option) *secureBroker {
	t.Helper()
	p := newPKI(t)
	for attempt := 1; ; attempt++ {
		cfg := broker.DefaultConfig()
		cfg.DataDir = t.TempDir()
		addr := map[string]string{}
		var specs []string
		for _, name := range []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"} {
			addr[name] = freeAddr(t)
			specs = append(specs, name+"://"+addr[name])
		}
		cfg.Listeners = strings.Join(specs, ",")
		cfg.HTTPListen = freeAddr(t)
		cfg.InterBrokerListen = "127.0.0.1:0"
		cfg.Meta.ListenClient, cfg.Meta.ListenPeer = freeAddr(t), freeAddr(t)
		cfg.Journal.FileBytes, cfg.Journal.CheckpointBytes = 1<<20, 4<<20
		cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile = p.certFile, p.keyFile, p.caFile
		cfg.SASLEnabledMechanisms = []string{auth.MechanismScramSHA256, auth.MechanismScramSHA512, auth.MechanismPlain}
		if mutate != nil {
			mutate(&cfg)
		}
		logger := zerolog.Nop()
		if os.Getenv("SLUICE_TEST_LOG") != "" {
			logger = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
		}
		b, err := broker.New(cfg, logger, opts...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- b.Run(ctx) }()
		select {
		case <-b.Ready():
			var once sync.Once
			t.Cleanup(func() {
				once.Do(func() {
					cancel()
					brokertest.RecvWithin(t, errc, 30*time.Second, "broker stop")
				})
			})
			return &secureBroker{Broker: b, addr: addr, pki: p}
		case err := <-errc:
			cancel()
			if !strings.Contains(fmt.Sprint(err), "address already in use") || attempt == 3 {
				t.Fatalf("broker stopped before it was ready: %v", err)
			}
		case <-time.After(60 * time.Second):
			cancel()
			t.Fatal("broker not ready after 60s")
		}
	}
}

func (sb *secureBroker) client(t testing.TB, listenerName string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(sb.addr[listenerName]), kgo.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// rawConn speaks Kafka frames over one connection, for what a client
// library would not send.
type rawConn struct {
	t    testing.TB
	nc   net.Conn
	r    *bufio.Reader
	corr int32
}

func dialRaw(t testing.TB, addr string, tlsCfg *tls.Config) *rawConn {
	t.Helper()
	var nc net.Conn
	var err error
	if tlsCfg != nil {
		nc, err = tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, tlsCfg)
	} else {
		nc, err = net.DialTimeout("tcp", addr, 10*time.Second)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
}

// roundTrip sends req and decodes its response; an error is what the read
// gave (io.EOF: the broker closed the connection without answering).
func (c *rawConn) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	c.t.Helper()
	c.corr++
	if _, err := c.nc.Write(brokertest.EncodeRequest(req, c.corr)); err != nil {
		return nil, err
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.r, body); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != c.corr {
		c.t.Fatalf("correlation %d, want %d", got, c.corr)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	body = body[4:]
	if resp.IsFlexible() && req.Key() != 18 {
		body = body[1:] // empty header tags
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decode %T: %v", resp, err)
	}
	return resp, nil
}

// closedByBroker reports whether the broker closed the connection: a read
// ends in EOF (or a reset) without a byte.
func (c *rawConn) closedByBroker() bool {
	_ = c.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := c.r.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

func handshake(mech string) *kmsg.SASLHandshakeRequest {
	r := kmsg.NewPtrSASLHandshakeRequest()
	r.SetVersion(1)
	r.Mechanism = mech
	return r
}

func authenticate(b []byte) *kmsg.SASLAuthenticateRequest {
	r := kmsg.NewPtrSASLAuthenticateRequest()
	r.SetVersion(1)
	r.SASLAuthBytes = b
	return r
}

func metadataRequest() *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	r.SetVersion(9)
	return r
}

func requireTool(t testing.TB, name string) string {
	t.Helper()
	path, err := execLookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is required in CI but unavailable: %v", name, err)
		}
		t.Skipf("%s not installed: %v", name, err)
	}
	return path
}
