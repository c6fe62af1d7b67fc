package meta

// This file owns the published in-sync sets: one key per broker holding the
// in-sync set of every partition the broker leads, as its replica core last
// reported it, with the leader epoch it leads (PublishInSync), and a stream
// of every broker's key (WatchInSync).
//
//	<prefix>isr/<node id>
//	{"v":1,"partitions":{"<topicID>:<n>":{"epoch":7,"isr":[1,2,3]}, ...}}
//
// The in-sync set lives in the leader's replica core; other brokers learn
// it only from here. Without the key they could only report the replicas
// whose registrations live, and a registration outlives a killed broker by
// up to its lease TTL.
//
// Invariant: an isr key is written only with a lease, its broker's
// registration lease, so it disappears with the broker's registration.
// Invariant: a published set is a report for one leader at one epoch: a
// reader uses it only while the partition state names that node as leader
// at that very epoch, and otherwise falls back to its own rule.
//
// Each key has one writer, the broker whose node id it names (a node id has
// one live registration at a time), so writes are plain puts. Each
// WatchInSync call owns one goroutine, counted in Store.watchers; its map
// and revision are local to it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// inSyncRecordVersion is the "v" field this build writes and reads.
const inSyncRecordVersion = 1

// PartitionRef names one partition of one topic.
type PartitionRef struct {
	TopicID   [16]byte
	Partition int32
}

// InSync is a leader's in-sync set at the epoch it leads.
type InSync struct {
	Epoch int32
	ISR   []int32 // node ids, the leader included
}

// InSyncSets is one broker's published sets, by partition.
type InSyncSets map[PartitionRef]InSync

// Equal reports whether s and o hold the same sets (nil equals empty).
func (s InSyncSets) Equal(o InSyncSets) bool {
	return maps.EqualFunc(s, o, func(a, b InSync) bool { return a.Epoch == b.Epoch && slices.Equal(a.ISR, b.ISR) })
}

type inSyncRecord struct {
	V          int                    `json:"v"`
	Partitions map[string]inSyncEntry `json:"partitions"`
}

type inSyncEntry struct {
	Epoch int32   `json:"epoch"`
	ISR   []int32 `json:"isr"`
}

func (s *Store) inSyncPrefix() string { return s.prefix + "isr/" }
func (s *Store) inSyncKey(node int32) string {
	return s.inSyncPrefix() + strconv.FormatInt(int64(node), 10)
}

func encodeInSync(sets InSyncSets) ([]byte, error) {
	rec := inSyncRecord{V: inSyncRecordVersion, Partitions: make(map[string]inSyncEntry, len(sets))}
	for ref, is := range sets {
		rec.Partitions[uuid.UUID(ref.TopicID).String()+":"+strconv.FormatInt(int64(ref.Partition), 10)] = inSyncEntry(is)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("meta: encode in-sync sets: %w", err)
	}
	return b, nil
}

// decodeInSync decodes kv, a key under inSyncPrefix, into its node id and sets.
func (s *Store) decodeInSync(kv *mvccpb.KeyValue) (int32, InSyncSets, error) {
	name := strings.TrimPrefix(string(kv.Key), s.inSyncPrefix())
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != name {
		return 0, nil, fmt.Errorf("meta: in-sync key %q: %w", kv.Key, ErrCorrupt)
	}
	var r inSyncRecord
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		return 0, nil, fmt.Errorf("meta: decode in-sync sets of node %d: %w: %w", id, ErrCorrupt, err)
	}
	switch {
	case r.V > inSyncRecordVersion:
		return 0, nil, fmt.Errorf("meta: decode in-sync sets of node %d: version %d, this build knows %d: %w", id, r.V, inSyncRecordVersion, ErrUnknownVersion)
	case r.V != inSyncRecordVersion:
		return 0, nil, fmt.Errorf("meta: decode in-sync sets of node %d: version %d: %w", id, r.V, ErrCorrupt)
	}
	sets := make(InSyncSets, len(r.Partitions))
	for k, e := range r.Partitions {
		idText, nText, _ := strings.Cut(k, ":")
		topic, err := uuid.Parse(idText)
		n, nerr := strconv.ParseInt(nText, 10, 32)
		if err != nil || topic.String() != idText || nerr != nil || n < 0 {
			return 0, nil, fmt.Errorf("meta: decode in-sync sets of node %d: partition %q: %w", id, k, ErrCorrupt)
		}
		sets[PartitionRef{TopicID: topic, Partition: int32(n)}] = InSync(e)
	}
	return int32(id), sets, nil
}

// PublishInSync replaces node's published in-sync sets with sets, bound to
// lease (the node's registration lease, which must be live: a put with an
// expired lease fails).
func (s *Store) PublishInSync(ctx context.Context, node int32, lease clientv3.LeaseID, sets InSyncSets) error {
	if node < 0 || lease == 0 {
		return fmt.Errorf("meta: publish in-sync sets of node %d with lease %x: %w", node, int64(lease), ErrInvalidConfig)
	}
	val, err := encodeInSync(sets)
	if err != nil {
		return err
	}
	if _, err := s.client.Put(ctx, s.inSyncKey(node), string(val), clientv3.WithLease(lease)); err != nil {
		return fmt.Errorf("meta: publish in-sync sets of node %d: %w", node, err)
	}
	return nil
}

// WatchInSync streams every broker's published in-sync sets, by node id:
// first the whole map at the call (or the first one read later), then the
// whole map after every change. As in WatchBrokers, a newer map replaces
// one the reader has not taken yet (the channel holds one). A map sent is
// never changed afterwards. The channel closes when ctx ends or the Store
// closes.
func (s *Store) WatchInSync(ctx context.Context) <-chan map[int32]InSyncSets {
	out := make(chan map[int32]InSyncSets, 1)
	if !s.own() {
		close(out)
		return out
	}
	w := &inSyncWatcher{s: s, out: out}
	w.resync(ctx)
	go func() {
		defer s.watchers.Done()
		defer close(out)
		s.watchLoop(ctx, w)
	}()
	return out
}

// inSyncWatcher is the state of one WatchInSync goroutine.
type inSyncWatcher struct {
	s     *Store
	out   chan map[int32]InSyncSets
	known map[int32]InSyncSets // as of rev; replaced, never changed, once sent
	rev   int64                // revision known reflects; 0 = must resync
}

func (w *inSyncWatcher) synced() bool { return w.rev != 0 }

func (w *inSyncWatcher) resync(ctx context.Context) bool {
	resp, err := w.s.client.Get(ctx, w.s.inSyncPrefix(), clientv3.WithPrefix())
	if err != nil {
		if ctx.Err() == nil {
			w.s.log.Warn().Err(err).Msg("in-sync watch: resync failed")
		}
		return false
	}
	known := make(map[int32]InSyncSets, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if id, sets, err := w.s.decodeInSync(kv); err == nil {
			known[id] = sets
		} else {
			w.s.log.Error().Err(err).Msg("in-sync watch: skipping undecodable key")
		}
	}
	w.known, w.rev = known, resp.Header.Revision
	w.publish()
	return true
}

func (w *inSyncWatcher) watch(ctx context.Context) bool {
	wch := w.s.client.Watch(clientv3.WithRequireLeader(ctx), w.s.inSyncPrefix(),
		clientv3.WithPrefix(), clientv3.WithRev(w.rev+1))
	progressed := false
	for resp := range wch {
		if err := resp.Err(); err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) || resp.CompactRevision != 0 {
				w.s.log.Warn().Int64("revision", w.rev).Msg("in-sync watch: revision compacted; resyncing")
				w.rev = 0
				return true
			}
			if ctx.Err() == nil {
				w.s.log.Warn().Err(err).Msg("in-sync watch interrupted")
			}
			return progressed
		}
		if len(resp.Events) == 0 {
			continue
		}
		progressed = true
		known := maps.Clone(w.known) // the map last sent stays as it was
		for _, ev := range resp.Events {
			w.rev = ev.Kv.ModRevision
			if ev.Type == mvccpb.DELETE {
				name := strings.TrimPrefix(string(ev.Kv.Key), w.s.inSyncPrefix())
				if id, err := strconv.ParseInt(name, 10, 32); err == nil {
					delete(known, int32(id))
				}
				continue
			}
			id, sets, err := w.s.decodeInSync(ev.Kv)
			if err != nil {
				w.s.log.Error().Err(err).Msg("in-sync watch: skipping undecodable key")
				continue
			}
			known[id] = sets
		}
		w.known = known
		w.publish()
	}
	return progressed
}

// publish replaces any map the reader has not taken yet with known. The
// watcher is the only sender, so after the drain the send cannot block.
func (w *inSyncWatcher) publish() {
	select {
	case <-w.out:
	default:
	}
	w.out <- w.known
}
