package meta

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/freeport"

	"github.com/rs/zerolog"
)

// testTimeout bounds every blocking call in these tests.
const testTimeout = 30 * time.Second

// freeAddr returns a 127.0.0.1 address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	return freeport.Must(t)
}

// embeddedConfig is a single-member embedded config in a fresh temp dir.
func embeddedConfig(t *testing.T) Config {
	t.Helper()
	return Config{
		DataDir:      t.TempDir(),
		Name:         "1",
		ListenClient: freeAddr(t),
		ListenPeer:   freeAddr(t),
		StartTimeout: testTimeout,
	}
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// openStore opens cfg and closes the store at the end of the test.
func openStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := Open(testContext(t), cfg, zerolog.Nop())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestReopenKeepsTopicsAndClusterID(t *testing.T) {
	cfg := embeddedConfig(t)
	ctx := testContext(t)

	s, err := Open(ctx, cfg, zerolog.Nop())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	id, err := s.ClusterID(ctx)
	if err != nil {
		t.Fatalf("ClusterID: %v", err)
	}
	created, err := s.CreateTopic(ctx, Topic{Name: "orders", Partitions: 3, ReplicationFactor: 1,
		Configs: map[string]string{"retention.ms": "86400000"}})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	s = openStore(t, cfg)
	id2, err := s.ClusterID(ctx)
	if err != nil {
		t.Fatalf("ClusterID after reopen: %v", err)
	}
	if id2 != id {
		t.Errorf("cluster id changed across reopen: %q then %q", id, id2)
	}
	got, err := s.Topic(ctx, "orders")
	if err != nil {
		t.Fatalf("Topic after reopen: %v", err)
	}
	assertSameTopic(t, got, created)
}

func TestClusterIDFormatAndStable(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	id, err := s.ClusterID(ctx)
	if err != nil {
		t.Fatalf("ClusterID: %v", err)
	}
	if len(id) != 22 || strings.ContainsAny(id, "+/=") || id[0] == '-' {
		t.Errorf("cluster id %q is not 22 chars of unpadded base64url", id)
	}
	// A second store over the same etcd sees the same id (not its own cache).
	other := openStore(t, Config{Endpoints: s.Client().Endpoints(), StartTimeout: testTimeout})
	id2, err := other.ClusterID(ctx)
	if err != nil {
		t.Fatalf("ClusterID via endpoints: %v", err)
	}
	if id2 != id {
		t.Errorf("second store cluster id %q, want %q", id2, id)
	}
}

func TestOpenWithEndpoints(t *testing.T) {
	embedded := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	remote := openStore(t, Config{Endpoints: embedded.Client().Endpoints(), StartTimeout: testTimeout})
	if remote.etcd != nil {
		t.Fatal("store with Endpoints started an embedded etcd")
	}

	created, err := remote.CreateTopic(ctx, Topic{Name: "via-endpoints", Partitions: 2, ReplicationFactor: 1})
	if err != nil {
		t.Fatalf("CreateTopic via endpoints: %v", err)
	}
	got, err := embedded.Topic(ctx, "via-endpoints")
	if err != nil {
		t.Fatalf("Topic via embedded: %v", err)
	}
	assertSameTopic(t, got, created)
}

func TestOpenFailsWhenPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })

	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"client port", func(c *Config) { c.ListenClient = l.Addr().String() }},
		{"peer port", func(c *Config) { c.ListenPeer = l.Addr().String() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := embeddedConfig(t)
			tt.edit(&cfg)
			s, err := Open(testContext(t), cfg, zerolog.Nop())
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded on a port in use")
			}
			if !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "meta: start embedded etcd") {
				t.Errorf("Open error %q does not say the address is in use", err)
			}
		})
	}
}

func TestOpenRefusesNewerLayout(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	if _, err := s.Client().Put(ctx, s.Prefix()+"layout", "2"); err != nil {
		t.Fatalf("put layout: %v", err)
	}
	other, err := Open(ctx, Config{Endpoints: s.Client().Endpoints(), StartTimeout: testTimeout}, zerolog.Nop())
	if err == nil {
		_ = other.Close()
	}
	if !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("Open over layout 2: got %v, want ErrUnknownVersion", err)
	}
}

func TestOpenLogsEtcdWarningsOnly(t *testing.T) {
	var buf syncBuffer
	s, err := Open(testContext(t), embeddedConfig(t), zerolog.New(&buf))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if strings.Contains(line, `"component":"etcd"`) && strings.Contains(line, `"level":"info"`) {
			t.Errorf("etcd info line forwarded: %s", line)
		}
	}
	if !strings.Contains(buf.String(), `"component":"meta"`) {
		t.Errorf("no meta log lines in %q", buf.String())
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"defaults with data dir", Config{DataDir: "/tmp/x"}, false},
		{"endpoints need no data dir", Config{Endpoints: []string{"http://127.0.0.1:2379"}}, false},
		{"no data dir", Config{}, true},
		{"empty endpoint", Config{Endpoints: []string{" "}}, true},
		{"prefix without slash", Config{DataDir: "/tmp/x", Prefix: "/sluice"}, true},
		{"bad client addr", Config{DataDir: "/tmp/x", ListenClient: "nope"}, true},
		{"bad peer addr", Config{DataDir: "/tmp/x", ListenPeer: "nope"}, true},
		{"name with comma", Config{DataDir: "/tmp/x", Name: "a,b"}, true},
		{"initial cluster has us", Config{DataDir: "/tmp/x", Name: "2",
			InitialCluster: "1=http://10.0.0.1:2380,2=http://10.0.0.2:2380"}, false},
		{"initial cluster lacks us", Config{DataDir: "/tmp/x", Name: "3",
			InitialCluster: "1=http://10.0.0.1:2380,2=http://10.0.0.2:2380"}, true},
		{"initial cluster garbage", Config{DataDir: "/tmp/x", InitialCluster: "garbage"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Validate() = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestAdvertiseURLs(t *testing.T) {
	cfg := Config{DataDir: "/tmp/x", Name: "2", ListenClient: "0.0.0.0:2379", ListenPeer: "0.0.0.0:2380",
		InitialCluster: "1=http://10.0.0.1:2380,2=http://10.0.0.2:2380"}.withDefaults()
	peers, err := cfg.advertisePeerURLs()
	if err != nil {
		t.Fatalf("advertisePeerURLs: %v", err)
	}
	if len(peers) != 1 || peers[0].String() != "http://10.0.0.2:2380" {
		t.Errorf("advertised peer URLs %v, want [http://10.0.0.2:2380]", peers)
	}
	client := cfg.advertiseClientURL(peers[0])
	if got := client.String(); got != "http://10.0.0.2:2379" {
		t.Errorf("advertised client URL %s, want http://10.0.0.2:2379", got)
	}
	single := Config{DataDir: "/tmp/x"}.withDefaults()
	if got, want := single.initialCluster(), "1=http://127.0.0.1:2380"; got != want {
		t.Errorf("single-member initial cluster %q, want %q", got, want)
	}
}

func TestOpenUnreachableEndpointsFailsInTime(t *testing.T) {
	cfg := Config{Endpoints: []string{"http://" + freeAddr(t)}, StartTimeout: 500 * time.Millisecond}
	s, err := Open(testContext(t), cfg, zerolog.Nop())
	if err == nil {
		_ = s.Close()
		t.Fatal("Open succeeded against an endpoint nobody listens on")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Open error %v, want it to wrap context.DeadlineExceeded", err)
	}
}
