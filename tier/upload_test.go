package tier

// The upload's intent: written to the head before the PUT, so that every
// object an upload may leave behind is named, and a new leader deletes the
// object of an upload whose commit never landed without waiting for the
// scrub.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/mem"
)

// intentFirst is a bucket that, on every PUT of an object, reads the head
// and records a violation unless an intent names the key.
type intentFirst struct {
	objstore.Store
	index *meta.Store

	mu     sync.Mutex
	puts   int
	unsafe []string
}

func (s *intentFirst) Put(ctx context.Context, key string, body []byte) error {
	if k, ok := ParseKey(key); ok && !k.Manifest {
		h, err := s.index.RemoteHead(ctx, k.TopicID, k.Partition)
		named := err == nil && slices.ContainsFunc(h.Intents, func(in meta.RemoteIntent) bool { return in.Key == key })
		s.mu.Lock()
		s.puts++
		if !named {
			s.unsafe = append(s.unsafe, fmt.Sprintf("%s (head %v: intents %+v)", key, err, h.Intents))
		}
		s.mu.Unlock()
	}
	return s.Store.Put(ctx, key, body)
}

func TestUploadPutsOnlyWhatAnIntentNames(t *testing.T) {
	obj := &intentFirst{Store: mem.New()}
	f := newFixture(t, obj)
	obj.index = f.store
	policy := Policy{Tiered: true, RetentionMs: Unlimited, RetentionBytes: Unlimited, LocalRetentionMs: Unlimited, LocalRetentionBytes: Unlimited}
	for range 3 {
		f.append(t, 6)
		f.pass(t, policy)
	}
	obj.mu.Lock()
	defer obj.mu.Unlock()
	if obj.puts == 0 {
		t.Fatal("nothing was uploaded")
	}
	if len(obj.unsafe) > 0 {
		t.Fatalf("%d of %d objects PUT with no intent naming them: %v", len(obj.unsafe), obj.puts, obj.unsafe)
	}
}

// deposeOnPut is a bucket whose first successful PUT of an object is
// followed by an election: the uploader's commit is fenced.
type deposeOnPut struct {
	objstore.Store
	depose func()
	once   sync.Once
	key    string
}

func (s *deposeOnPut) Put(ctx context.Context, key string, body []byte) error {
	if err := s.Store.Put(ctx, key, body); err != nil {
		return err
	}
	if k, ok := ParseKey(key); ok && !k.Manifest {
		s.once.Do(func() { s.key = key; s.depose() })
	}
	return nil
}

// The PUT succeeds and the commit is fenced (a new leader was elected in
// between): the object stays named by its intent, and the new leader's
// first pass deletes it, with no scrub involved.
func TestNewLeaderDeletesAnUncommittedUpload(t *testing.T) {
	obj := &deposeOnPut{Store: mem.New()}
	f := newFixture(t, obj)
	var newFence meta.PartitionState
	obj.depose = func() {
		next := f.fence
		next.LeaderEpoch = 2
		var err error
		if newFence, err = f.store.UpdatePartition(context.Background(), next); err != nil {
			t.Error(err)
		}
	}
	policy := Policy{Tiered: true, RetentionMs: Unlimited, RetentionBytes: Unlimited, LocalRetentionMs: Unlimited, LocalRetentionBytes: Unlimited}
	f.append(t, 6)
	f.pass(t, policy)
	if err := f.m.parts[partKey{f.p.id, 0}].lastError; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("the deposed leader's commit: %v, want ErrNotLeader", err)
	}
	if obj.key == "" {
		t.Fatal("nothing was PUT")
	}
	if _, err := obj.Head(t.Context(), obj.key); err != nil {
		t.Fatalf("the uncommitted object: %v", err)
	}
	f.fence = newFence
	f.pass(t, policy)
	if _, err := obj.Head(t.Context(), obj.key); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the new leader's pass left the uncommitted object %s: %v", obj.key, err)
	}
	h, err := f.store.RemoteHead(t.Context(), f.p.id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Intents) != 0 || h.RemoteEnd == 0 || slices.ContainsFunc(h.Objects, func(o meta.RemoteObject) bool { return o.Key == obj.key }) {
		t.Fatalf("head after the new leader's pass: %+v", h)
	}
	for _, o := range h.Objects {
		if _, err := obj.Head(t.Context(), o.Key); err != nil {
			t.Fatalf("the head names %s: %v", o.Key, err)
		}
	}
}
