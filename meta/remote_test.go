package meta

import (
	"errors"
	"fmt"
	"testing"
)

func TestRemoteHeadFencedByPartitionState(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	_, states, err := s.CreateTopicWithPartitions(ctx, Topic{Name: "tiered", ReplicationFactor: 1}, replicaLists(2, 1))
	if err != nil {
		t.Fatal(err)
	}
	st := states[0]
	st.Leader, st.LeaderEpoch = st.Replicas[0], 1
	if st, err = s.UpdatePartition(ctx, st); err != nil {
		t.Fatal(err)
	}

	h, err := s.RemoteHead(ctx, st.TopicID, 0)
	if err != nil || h.Revision != 0 || h.RemoteEnd != 0 {
		t.Fatalf("missing head: %+v, %v", h, err)
	}
	h.RemoteEnd = 100
	h.Objects = []RemoteObject{{Key: "k0", Base: 0, Next: 100, Size: 4096, Epoch: 1}}
	h.Epochs = []RemoteEpoch{{Epoch: 1, Start: 0}}
	written, err := s.PutRemoteHead(ctx, h, st)
	if err != nil {
		t.Fatalf("first head write: %v", err)
	}
	// A second write from the same read revision loses: the head moved.
	if _, err := s.PutRemoteHead(ctx, h, st); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale head write: %v, want ErrConflict", err)
	}
	// Going backwards is refused even at the right revision.
	back := written
	back.RemoteEnd = 50
	if _, err := s.PutRemoteHead(ctx, back, st); !errors.Is(err, ErrInvalidPartitionState) {
		t.Fatalf("a head moving the remote end back: %v, want ErrInvalidPartitionState", err)
	}

	// An election moves the partition state: the old leader's writes fail
	// with ErrFenced even though the head did not move.
	next := st
	next.LeaderEpoch = 2
	if _, err := s.UpdatePartition(ctx, next); err != nil {
		t.Fatal(err)
	}
	more := written
	more.RemoteEnd = 200
	if _, err := s.PutRemoteHead(ctx, more, st); !errors.Is(err, ErrFenced) {
		t.Fatalf("write from a deposed leader: %v, want ErrFenced", err)
	}

	got, err := s.RemoteHead(ctx, st.TopicID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.RemoteEnd != 100 || len(got.Objects) != 1 || got.Objects[0].Key != "k0" || got.Revision != written.Revision {
		t.Fatalf("head after fenced writes: %+v, want the first write", got)
	}
	heads, err := s.RemoteHeads(ctx)
	if err != nil || len(heads) != 1 || heads[0].Partition != 0 {
		t.Fatalf("RemoteHeads: %+v, %v", heads, err)
	}
	if err := s.DeleteRemoteHead(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRemoteHead(ctx, got); err != nil {
		t.Fatalf("deleting a deleted head: %v", err)
	}
}

func TestRemoteHeadRejectsDisorderedWatermarks(t *testing.T) {
	for _, h := range []RemoteHead{
		{LogStart: 10, RemoteEnd: 5},
		{Clean: 6, LogStart: 5, RemoteEnd: 9},
		{Clean: -1},
	} {
		if err := validateHead(h); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%+v: %v, want ErrCorrupt", h, err)
		}
	}
	if _, err := decodeHead([16]byte{1}, 0, []byte(fmt.Sprintf(`{"v":%d}`, remoteHeadVersion+1)), 1); !errors.Is(err, ErrUnknownVersion) {
		t.Errorf("newer version: %v", err)
	}
	if _, err := decodeHead([16]byte{1}, 0, []byte(`{"v":1,`), 1); !errors.Is(err, ErrCorrupt) {
		t.Errorf("garbage: %v", err)
	}
}

// FuzzDecodeHead: a head read from etcd may be anything another writer put
// there. It decodes or fails with ErrCorrupt or ErrUnknownVersion, never
// panics, and a head that decodes keeps the watermark order.
func FuzzDecodeHead(f *testing.F) {
	f.Add([]byte(`{"v":1,"log_start":0,"clean":0,"remote_end":10,"objects":[{"key":"k","base":0,"next":10}]}`))
	f.Add([]byte(`{"v":1,"log_start":5,"clean":6,"remote_end":10}`))
	f.Add([]byte(`{"v":9}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHead([16]byte{1}, 0, b, 1)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnknownVersion) {
				t.Fatalf("error %v is neither corrupt nor unknown version", err)
			}
			return
		}
		if h.Clean < 0 || h.LogStart < h.Clean || h.RemoteEnd < h.LogStart || h.PendingClean > h.LogStart {
			t.Fatalf("decoded a head out of order: %+v", h)
		}
	})
}
