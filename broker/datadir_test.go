package broker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/rs/zerolog"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceSome writes n records to topic and fails the test on any error.
func produceSome(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		r := &kgo.Record{Topic: topic, Value: []byte(strings.Repeat("v", 100) + string(rune('a'+i%26)))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// walBytes sums the sizes of every file under dir.
func walBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// runUntilReadyOrError runs a broker and reports Run's error if it stops
// before it is ready; a ready broker is stopped at once and nil returned.
func runUntilReadyOrError(t *testing.T, cfg Config) error {
	t.Helper()
	b, err := New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- b.Run(ctx) }()
	select {
	case err := <-errc:
		return err
	case <-b.Ready():
		cancel()
		if err := brokertest.RecvWithin(t, errc, stopLimit, "Run to return after its cancel"); err != nil {
			t.Fatalf("stop: %v", err)
		}
		return nil
	case <-time.After(60 * time.Second):
		t.Fatal("broker neither ready nor stopped after 60s")
		return nil
	}
}

func TestStartRefusesDataDirOfAnotherCluster(t *testing.T) {
	cfg := testBrokerConfig(t)
	b, stop := startStoppableBroker(t, cfg)
	cl := testClient(t, b)
	createTopic(t, cl, "kept", 2, nil)
	produceSome(t, cl, "kept", 50)
	cl.Close()
	stop()
	walDir := filepath.Join(cfg.DataDir, "wal")
	before := walBytes(t, walDir)
	if before == 0 {
		t.Fatal("no log bytes after producing")
	}
	// The metadata is lost: a wiped etcd (a wrong endpoint or prefix looks
	// the same to the broker: a cluster that is not this data's).
	if err := os.RemoveAll(filepath.Join(cfg.DataDir, "etcd")); err != nil {
		t.Fatal(err)
	}
	err := runUntilReadyOrError(t, cfg)
	if !errors.Is(err, node.ErrForeignDataDir) {
		t.Fatalf("start against replaced metadata: %v, want a refusal", err)
	}
	props, rerr := os.ReadFile(filepath.Join(cfg.DataDir, node.IdentityFile))
	if rerr != nil {
		t.Fatal(rerr)
	}
	old, derr := node.DecodeIdentity(props)
	if derr != nil {
		t.Fatal(derr)
	}
	if !strings.Contains(err.Error(), old.ClusterID) || strings.Count(err.Error(), "cluster ") < 2 {
		t.Fatalf("refusal does not name both cluster ids: %v", err)
	}
	if after := walBytes(t, walDir); after != before {
		t.Fatalf("log bytes %d after the refused start, %d before", after, before)
	}
}

func TestStartRefusesDataDirOfAnotherNode(t *testing.T) {
	cfg := testBrokerConfig(t)
	_, stop := startStoppableBroker(t, cfg)
	stop()
	cfg.NodeID = 7
	if err := runUntilReadyOrError(t, cfg); !errors.Is(err, node.ErrForeignDataDir) || !strings.Contains(err.Error(), "node 1") {
		t.Fatalf("start as another node: %v, want a refusal naming node 1", err)
	}
}

func TestUnknownTopicDataIsSetAsideNotDeleted(t *testing.T) {
	// Without the identity file (a data directory from before it existed)
	// the broker cannot tell a wrong etcd from topics deleted while it was
	// down; either way the data is moved aside, never deleted.
	cfg := testBrokerConfig(t)
	b, stop := startStoppableBroker(t, cfg)
	cl := testClient(t, b)
	createTopic(t, cl, "orphan", 1, nil)
	produceSome(t, cl, "orphan", 20)
	cl.Close()
	stop()
	before := walBytes(t, filepath.Join(cfg.DataDir, "wal"))
	for _, p := range []string{"etcd", node.IdentityFile} {
		if err := os.RemoveAll(filepath.Join(cfg.DataDir, p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := runUntilReadyOrError(t, cfg); err != nil {
		t.Fatal(err)
	}
	if n := walBytes(t, filepath.Join(cfg.DataDir, "wal")); n != 0 {
		t.Fatalf("%d bytes of unknown topics still under wal/", n)
	}
	set, err := filepath.Glob(filepath.Join(cfg.DataDir, node.OrphansDir, "*", "wal"))
	if err != nil || len(set) != 1 {
		t.Fatalf("orphans: %v %v, want one wal directory set aside", set, err)
	}
	if n := walBytes(t, set[0]); n != before {
		t.Fatalf("orphans hold %d log bytes, the unknown topic had %d", n, before)
	}
}

func TestSecondBrokerOnTheSameDataDirIsRefused(t *testing.T) {
	cfg := testBrokerConfig(t)
	_, stop := startStoppableBroker(t, cfg)
	second := testBrokerConfig(t)
	second.DataDir = cfg.DataDir
	began := time.Now()
	err := runUntilReadyOrError(t, second)
	if !errors.Is(err, node.ErrDataDirInUse) {
		t.Fatalf("a second broker on the same data directory: %v, want a refusal", err)
	}
	t.Logf("refused in %v: %v", time.Since(began), err)
	stop()
	if err := runUntilReadyOrError(t, second); err != nil {
		t.Fatalf("after the first broker stopped: %v", err)
	}
}
