// Package brokertest holds what the broker's packages share in their
// tests: bounded waits, record batches built as a producer sends them, and
// a partition network that drops everything. Only tests import it.
//
// Invariant: a test never blocks on a bare channel receive or
// WaitGroup.Wait whose other side is the code under test; every wait here
// has its own deadline, so a broker that never answers fails the test in
// seconds with what it waited for, not at the package timeout.
package brokertest

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/freeport"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/broker/replica"
)

// Batch builds an uncompressed v2 batch of n records as a producer sends
// it; record i has timestamp ts+i.
func Batch(n int, pid int64, epoch int16, seq int32, ts int64) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		r := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i),
			Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "value-%d", i)}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(n - 1),
		FirstTimestamp: ts, MaxTimestamp: ts + int64(n-1),
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq,
		NumRecords: int32(n), Records: recs,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	return Recrc(raw)
}

// Recrc recomputes a batch's CRC after a test changed its bytes.
func Recrc(raw []byte) []byte {
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// RecvWithin receives from ch, failing the test if nothing arrives within d.
func RecvWithin[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s", d, what)
		panic("unreachable")
	}
}

// WaitGroupWithin waits for wg, failing the test if it is not done within d.
func WaitGroupWithin(t testing.TB, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	RecvWithin(t, done, d, what)
}

// Eventually polls cond until it holds or the deadline passes.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	EventuallyWhy(t, within, what, func() (bool, string) { return cond(), "" })
}

// EventuallyWhy polls cond until it holds or the deadline passes; cond says
// why it does not hold yet, for the failure message.
func EventuallyWhy(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s: %s", within, what, why)
		case <-poll.C:
		}
	}
}

// QuietNet is a partition.Net that drops everything: the core's messages
// to the controller and its fetches go nowhere.
type QuietNet struct{}

// SendToController drops m.
func (QuietNet) SendToController(replica.Message) {}

// FetchReady drops the fetch.
func (QuietNet) FetchReady(int32, *partition.Partition) {}

// LeaseHeld reports a held lease.
func (QuietNet) LeaseHeld() bool { return true }

// EncodeRequest frames req as a client with id "test" sends it.
func EncodeRequest(req kmsg.Request, correlation int32) []byte {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("test"))
	return f.AppendRequest(nil, req, correlation)
}

// FreeAddr is a 127.0.0.1 address with a port free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return freeport.Must(t)
}

// Config is a lone broker in a temporary directory on free ports.
func Config(t testing.TB) node.Config {
	cfg := node.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.KafkaListen = FreeAddr(t)
	cfg.HTTPListen = FreeAddr(t)
	cfg.InterBrokerListen = "127.0.0.1:0" // found by the other brokers in etcd, never by clients
	cfg.Meta.ListenClient = FreeAddr(t)
	cfg.Meta.ListenPeer = FreeAddr(t)
	cfg.RetentionCheckInterval = 100 * time.Millisecond
	// A fresh journal zero-fills a few files of this size: keep them small.
	cfg.Journal.FileBytes, cfg.Journal.CheckpointBytes = 1<<20, 4<<20
	return cfg
}
