package meta

import (
	"errors"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A request is stored against an existing partition only; a second
// request keeps the first one's original replicas; a cancel turns the
// target back to them; synced marks are listed with their reassignment
// and deleted with it; a finish at a stale revision deletes nothing.
func TestReassignmentRecordLifecycle(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	tp, _, err := s.CreateTopicWithPartitions(ctx, Topic{Name: "moved", ReplicationFactor: 3}, [][]int32{{1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	ref := PartitionRef{TopicID: tp.ID, Partition: 0}
	now := time.Date(2026, 12, 2, 23, 0, 0, 0, time.UTC)

	if _, err := s.RequestReassignment(ctx, PartitionRef{TopicID: tp.ID, Partition: 1}, []int32{1, 2, 4}, []int32{1, 2, 3}, now); !errors.Is(err, ErrPartitionNotFound) {
		t.Fatalf("request for a partition without state: %v, want ErrPartitionNotFound", err)
	}
	if _, err := s.CancelReassignment(ctx, ref, now); !errors.Is(err, ErrNoReassignment) {
		t.Fatalf("cancel of nothing: %v, want ErrNoReassignment", err)
	}
	if err := s.MarkSynced(ctx, ref, 4, SyncedMark{Epoch: 1, End: 10}); !errors.Is(err, ErrNoReassignment) {
		t.Fatalf("mark without a reassignment: %v, want ErrNoReassignment", err)
	}
	first, err := s.RequestReassignment(ctx, ref, []int32{1, 2, 4}, []int32{1, 2, 3}, now)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.RequestReassignment(ctx, ref, []int32{1, 5, 4}, []int32{1, 2, 3, 4}, now.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(second.Original, []int32{1, 2, 3}) || second.Revision <= first.Revision {
		t.Fatalf("second request %+v: want the first one's original [1 2 3] at a newer revision", second)
	}
	if err := s.MarkSynced(ctx, ref, 4, SyncedMark{Epoch: 3, End: 42}); err != nil {
		t.Fatal(err)
	}
	list, err := s.Reassignments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || !slices.Equal(list[0].Target, []int32{1, 5, 4}) || list[0].Synced[4] != (SyncedMark{Epoch: 3, End: 42}) ||
		!list[0].Requested.Equal(now.Add(time.Second)) {
		t.Fatalf("listed %+v", list)
	}
	cancelled, err := s.CancelReassignment(ctx, ref, now.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if !cancelled.Cancelled || !slices.Equal(cancelled.Target, []int32{1, 2, 3}) {
		t.Fatalf("cancelled %+v: want target [1 2 3], cancelled", cancelled)
	}
	if err := s.FinishReassignment(ctx, second); !errors.Is(err, ErrConflict) {
		t.Fatalf("finish at a stale revision: %v, want ErrConflict", err)
	}
	if err := s.FinishReassignment(ctx, cancelled, clientv3.Compare(clientv3.CreateRevision("/nope"), ">", 0)); !errors.Is(err, ErrNotController) {
		t.Fatalf("finish with a failing condition: %v, want ErrNotController", err)
	}
	if err := s.FinishReassignment(ctx, cancelled); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Client().Get(ctx, s.syncedPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("synced marks left after finish: %v %v", resp, err)
	}
	if list, err := s.Reassignments(ctx); err != nil || len(list) != 0 {
		t.Fatalf("after finish: %+v %v", list, err)
	}
}

// A record that is not this build's JSON fails the listing with ErrCorrupt
// or ErrUnknownVersion, never a crash.
func TestReassignmentRecordDecodeRefusesBadRecords(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	tp, _, err := s.CreateTopicWithPartitions(ctx, Topic{Name: "bad", ReplicationFactor: 1}, [][]int32{{1}})
	if err != nil {
		t.Fatal(err)
	}
	key := s.reassignKey(PartitionRef{TopicID: tp.ID})
	for _, c := range []struct {
		val  string
		want error
	}{
		{`{`, ErrCorrupt},
		{`{"v":2,"target":[1],"original":[1]}`, ErrUnknownVersion},
		{`{"v":1,"target":[],"original":[1]}`, ErrCorrupt},
		{`{"v":1,"target":[1,1],"original":[1]}`, ErrCorrupt},
		{`{"v":0,"target":[1],"original":[1]}`, ErrCorrupt},
	} {
		if _, err := s.Client().Put(ctx, key, c.val); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Reassignments(ctx); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.val, err, c.want)
		}
	}
}

// A stored reassignment record decodes to one that encodes and decodes to
// itself, or fails with ErrCorrupt or ErrUnknownVersion.
func FuzzDecodeReassignment(f *testing.F) {
	f.Add(testTopicID+"/0", []byte(`{"v":1,"target":[1,2,4],"original":[1,2,3],"requested":"2026-12-02T23:00:00Z","cancelled":false}`))
	f.Add(testTopicID+"/7", []byte(`{"v":1,"target":[3],"original":[3],"requested":"2026-12-02T23:00:00+02:00","cancelled":true}`))
	f.Add(testTopicID+"/1", []byte(`{"v":2,"target":[1]}`))
	f.Add("x/1", []byte(`{"v":1,"target":[1,1],"original":[]}`))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		r, err := decodeReassign(key, &mvccpb.KeyValue{Value: value, ModRevision: 5})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnknownVersion) {
				t.Fatalf("decodeReassign error %v is neither ErrCorrupt nor ErrUnknownVersion", err)
			}
			return
		}
		b, err := encodeReassign(r)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", r, err)
		}
		again, err := decodeReassign(key, &mvccpb.KeyValue{Value: b, ModRevision: 5})
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", b, err)
		}
		if !slices.Equal(again.Target, r.Target) || !slices.Equal(again.Original, r.Original) || again.Cancelled != r.Cancelled ||
			!again.Requested.Equal(r.Requested) || again.Ref() != r.Ref() {
			t.Fatalf("round trip %+v → %+v", r, again)
		}
	})
}
