package meta

import (
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

func TestInSyncEncodeDecode(t *testing.T) {
	s := &Store{prefix: DefaultPrefix}
	topic := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	sets := InSyncSets{
		{TopicID: topic, Partition: 0}: {Epoch: 3, ISR: []int32{1, 2, 3}},
		{TopicID: topic, Partition: 7}: {Epoch: 1, ISR: []int32{2}},
	}
	val, err := encodeInSync(sets)
	if err != nil {
		t.Fatal(err)
	}
	id, got, err := s.decodeInSync(&mvccpb.KeyValue{Key: []byte(s.inSyncKey(2)), Value: val})
	if err != nil || id != 2 || !got.Equal(sets) {
		t.Fatalf("decode(encode(%v)) = node %d, %v, %v", sets, id, got, err)
	}
	if empty, _ := encodeInSync(nil); string(empty) != `{"v":1,"partitions":{}}` {
		t.Errorf("encode(nil) = %s", empty)
	}

	for _, tc := range []struct {
		name, key, val string
		want           error
	}{
		{"newer version", "2", `{"v":2,"partitions":{}}`, ErrUnknownVersion},
		{"no version", "2", `{"partitions":{}}`, ErrCorrupt},
		{"not json", "2", `{`, ErrCorrupt},
		{"bad node", "02", `{"v":1,"partitions":{}}`, ErrCorrupt},
		{"bad partition", "2", `{"v":1,"partitions":{"01020304-0506-0708-090a-0b0c0d0e0f10:-1":{"epoch":1,"isr":[2]}}}`, ErrCorrupt},
		{"bad topic", "2", `{"v":1,"partitions":{"topic:0":{"epoch":1,"isr":[2]}}}`, ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.decodeInSync(&mvccpb.KeyValue{Key: []byte(s.inSyncPrefix() + tc.key), Value: []byte(tc.val)})
			if !errors.Is(err, tc.want) {
				t.Fatalf("decode %s = %v, want %v", tc.val, err, tc.want)
			}
		})
	}
}

// TestWatchInSyncFollowsPublishAndRegistration: a published set reaches
// every watcher, a newer one replaces it, and it goes with the
// registration lease it was written under.
func TestWatchInSyncFollowsPublishAndRegistration(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	other := clientStore(t, s)
	ctx := testContext(t)
	r1 := register(t, s, testBroker(1), 0)
	r2 := register(t, s, testBroker(2), 0)
	topic := [16]byte{9}
	ref := PartitionRef{TopicID: topic, Partition: 4}

	w := other.WatchInSync(ctx)
	if m, _ := recvWithin(t, w, "the initial map"); len(m) != 0 {
		t.Fatalf("initial map %v, want empty", m)
	}
	next := func(want string) {
		t.Helper()
		waitUntil(t, want, func() bool {
			select {
			case m := <-w:
				return fmt.Sprint(m) == want
			default:
				return false
			}
		})
	}
	if err := s.PublishInSync(ctx, 1, r1.Info().Lease, InSyncSets{ref: {Epoch: 2, ISR: []int32{1, 2, 3}}}); err != nil {
		t.Fatal(err)
	}
	next(fmt.Sprint(map[int32]InSyncSets{1: {ref: {Epoch: 2, ISR: []int32{1, 2, 3}}}}))
	if err := s.PublishInSync(ctx, 2, r2.Info().Lease, InSyncSets{}); err != nil {
		t.Fatal(err)
	}
	if err := s.PublishInSync(ctx, 1, r1.Info().Lease, InSyncSets{ref: {Epoch: 2, ISR: []int32{1, 3}}}); err != nil {
		t.Fatal(err)
	}
	next(fmt.Sprint(map[int32]InSyncSets{1: {ref: {Epoch: 2, ISR: []int32{1, 3}}}, 2: {}}))

	if err := r1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	next(fmt.Sprint(map[int32]InSyncSets{2: {}}))
	if err := s.PublishInSync(ctx, 1, r1.Info().Lease, InSyncSets{}); err == nil {
		t.Fatal("publish under a revoked lease succeeded")
	}
	if err := s.PublishInSync(ctx, 1, 0, InSyncSets{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("publish without a lease: %v, want ErrInvalidConfig", err)
	}
}
