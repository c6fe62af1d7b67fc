package tier

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier/object"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/mem"
	"github.com/sluice-mq/sluice/wal"
)

// inspectBatch is one valid v2 batch of n records at base, stamped with
// epoch, as the log stores it.
func inspectBatch(base wal.Offset, epoch wal.Epoch, n int, ts int64) []byte {
	var recs []byte
	for i := range n {
		r := kmsg.Record{OffsetDelta: int32(i), Key: []byte{'k', byte('0' + i%10)}, Value: bytes.Repeat([]byte{byte('a' + i%26)}, 20)}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	rb := kmsg.RecordBatch{FirstOffset: int64(base), PartitionLeaderEpoch: int32(epoch), Length: int32(wal.BatchHeaderSize - 12 + len(recs)),
		Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: ts, MaxTimestamp: ts, ProducerID: -1, ProducerEpoch: -1,
		FirstSequence: -1, NumRecords: int32(n), Records: recs}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// part is one partition's objects in a store, built by hand.
type part struct {
	store objstore.Store
	id    [16]byte
	n     int32
}

func newPart(store objstore.Store) *part {
	return &part{store: store, id: uuid.New(), n: 3}
}

// put builds and stores an object of batches of 2 records from base, all
// at epoch, chunks of chunkBytes.
func (p *part) put(t *testing.T, base wal.Offset, batches int, epoch wal.Epoch, chunkBytes int) meta.RemoteObject {
	t.Helper()
	b, err := object.NewBuilder(object.BuilderConfig{TopicID: p.id, Partition: p.n, TargetChunkBytes: chunkBytes})
	if err != nil {
		t.Fatal(err)
	}
	for i := range batches {
		if err := b.Add(inspectBatch(base+wal.Offset(2*i), epoch, 2, 1000+int64(base)+int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	body, f, err := b.Finish([]wal.EpochEntry{{Epoch: epoch, StartOffset: 0}}, []byte("snapshot"))
	if err != nil {
		t.Fatal(err)
	}
	key := objectKey(p.id, p.n, base, epoch)
	if err := p.store.Put(t.Context(), key, body); err != nil {
		t.Fatal(err)
	}
	return meta.RemoteObject{Key: key, Base: int64(base), Next: int64(f.NextOffset), Size: int64(len(body)), MaxTs: f.MaxTimestamp(), Epoch: int32(epoch)}
}

// manifest stores a manifest of objs and returns its ref.
func (p *part) manifest(t *testing.T, objs []meta.RemoteObject) meta.ManifestRef {
	t.Helper()
	body, err := encodeManifest(objs)
	if err != nil {
		t.Fatal(err)
	}
	key := manifestKey(p.id, p.n, wal.Offset(objs[0].Base))
	if err := p.store.Put(t.Context(), key, body); err != nil {
		t.Fatal(err)
	}
	return meta.ManifestRef{Key: key, Base: objs[0].Base, Next: objs[len(objs)-1].Next, Objects: len(objs)}
}

// head is a head over objects, the first count of them in a manifest.
func (p *part) head(t *testing.T, objs []meta.RemoteObject, inManifest int) meta.RemoteHead {
	t.Helper()
	h := meta.RemoteHead{TopicID: p.id, Partition: p.n, V: 1, Revision: 1,
		Epochs: []meta.RemoteEpoch{{Epoch: objs[0].Epoch, Start: objs[0].Base}}}
	if inManifest > 0 {
		h.Manifests = []meta.ManifestRef{p.manifest(t, objs[:inManifest])}
	}
	h.Objects = objs[inManifest:]
	h.Clean, h.LogStart, h.RemoteEnd = objs[0].Base, objs[0].Base, objs[len(objs)-1].Next
	return h
}

// standard is a partition of three objects [0, 20), [20, 40), [40, 60) at
// epoch 1, the first two in a manifest.
func standard(t *testing.T) (*part, meta.RemoteHead, []meta.RemoteObject) {
	p := newPart(mem.New())
	objs := []meta.RemoteObject{p.put(t, 0, 10, 1, 200), p.put(t, 20, 10, 1, 200), p.put(t, 40, 10, 1, 200)}
	return p, p.head(t, objs, 2), objs
}

func TestListObjectsManifestsThenHead(t *testing.T) {
	p, h, objs := standard(t)
	got, err := ListObjects(t.Context(), p.store, h)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Key != objs[0].Key || got[1].Key != objs[1].Key || got[2].Key != objs[2].Key {
		t.Fatalf("ListObjects = %+v", got)
	}
	if ps := CheckIndex(h, got); len(ps) != 0 {
		t.Fatalf("CheckIndex: %v", ps)
	}
	bad := h
	bad.Manifests = []meta.ManifestRef{h.Manifests[0]}
	bad.Manifests[0].Objects = 3
	if _, err := ListObjects(t.Context(), p.store, bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a manifest that disagrees with its ref: %v, want ErrCorrupt", err)
	}
	if err := p.store.Delete(t.Context(), h.Manifests[0].Key); err != nil {
		t.Fatal(err)
	}
	if _, err := ListObjects(t.Context(), p.store, h); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("a missing manifest: %v, want ErrNotFound", err)
	}
}

func TestReadFooterLongFooter(t *testing.T) {
	// 1,500 one-batch chunks make a footer longer than the first tail GET.
	p := newPart(mem.New())
	o := p.put(t, 100, 1500, 2, 1)
	f, err := ReadFooter(t.Context(), p.store, o)
	if err != nil {
		t.Fatal(err)
	}
	if f.NumChunks() != 1500 || f.BaseOffset != 100 || f.NextOffset != 3100 {
		t.Fatalf("footer: %d chunks, [%d, %d)", f.NumChunks(), f.BaseOffset, f.NextOffset)
	}
	data, err := ReadChunk(t.Context(), p.store, o, f, 1499)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := wal.ParseBatchHeader(data); h.BaseOffset != 3098 {
		t.Fatalf("last chunk starts at %d", h.BaseOffset)
	}
}

func TestRemoteBatchesFromAnOffset(t *testing.T) {
	p, h, _ := standard(t)
	objs, err := ListObjects(t.Context(), p.store, h)
	if err != nil {
		t.Fatal(err)
	}
	var bases []wal.Offset
	err = RemoteBatches(t.Context(), p.store, objs, 17, func(b []byte) error {
		bh, err := wal.ParseBatchHeader(b)
		if err != nil {
			return err
		}
		bases = append(bases, bh.BaseOffset)
		if bh.BaseOffset == 44 {
			return ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []wal.Offset{16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42, 44}
	if len(bases) != len(want) || bases[0] != 16 || bases[len(bases)-1] != 44 {
		t.Fatalf("batches from 17: %v, want %v", bases, want)
	}
}

func TestVerifyObject(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		name   string
		damage func(t *testing.T, p *part, h *meta.RemoteHead, o *meta.RemoteObject)
		prev   int64
		want   string // "" for no problem
	}{
		{name: "good", damage: func(*testing.T, *part, *meta.RemoteHead, *meta.RemoteObject) {}, prev: 20},
		{name: "byte flipped in a chunk", prev: 20, want: "crc", damage: func(t *testing.T, p *part, _ *meta.RemoteHead, o *meta.RemoteObject) {
			flip(t, p.store, o.Key, 100)
		}},
		{name: "missing", prev: 20, want: "missing", damage: func(t *testing.T, p *part, _ *meta.RemoteHead, o *meta.RemoteObject) {
			if err := p.store.Delete(context.Background(), o.Key); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "size", prev: 20, want: "the index says", damage: func(_ *testing.T, _ *part, _ *meta.RemoteHead, o *meta.RemoteObject) {
			o.Size--
		}},
		{name: "range", prev: 20, want: "holds [20, 40)", damage: func(_ *testing.T, _ *part, _ *meta.RemoteHead, o *meta.RemoteObject) {
			o.Next = 41
		}},
		{name: "gap above the log start", prev: 18, want: "previous object ends at 18", damage: func(*testing.T, *part, *meta.RemoteHead, *meta.RemoteObject) {}},
		{name: "epoch chain", prev: 20, want: "the head's chain says 3", damage: func(_ *testing.T, _ *part, h *meta.RemoteHead, _ *meta.RemoteObject) {
			h.Epochs = append(h.Epochs, meta.RemoteEpoch{Epoch: 3, Start: 30})
		}},
		{name: "footer", prev: 20, want: "footer", damage: func(t *testing.T, p *part, _ *meta.RemoteHead, o *meta.RemoteObject) {
			flip(t, p.store, o.Key, int(o.Size)-20)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, h, objs := standard(t)
			o := objs[1]
			tc.damage(t, p, &h, &o)
			ps := VerifyObject(ctx, p.store, h, o, tc.prev)
			if tc.want == "" {
				if len(ps) != 0 {
					t.Fatalf("problems in a good object: %v", ps)
				}
				return
			}
			for _, pr := range ps {
				if strings.Contains(pr.Msg, tc.want) && pr.Key == o.Key {
					return
				}
			}
			t.Fatalf("problems %v, want one saying %q", ps, tc.want)
		})
	}
}

func TestCheckIndex(t *testing.T) {
	p, h, objs := standard(t)
	_ = p
	tests := []struct {
		name string
		edit func(h *meta.RemoteHead, objs []meta.RemoteObject) []meta.RemoteObject
		want string
	}{
		{"good", func(_ *meta.RemoteHead, o []meta.RemoteObject) []meta.RemoteObject { return o }, ""},
		{"gap above the log start", func(_ *meta.RemoteHead, o []meta.RemoteObject) []meta.RemoteObject {
			return []meta.RemoteObject{o[0], o[2]}
		}, "previous object ends at 20"},
		{"gap below the log start", func(h *meta.RemoteHead, o []meta.RemoteObject) []meta.RemoteObject {
			h.LogStart = 40
			return []meta.RemoteObject{o[0], o[2]}
		}, ""},
		{"end", func(h *meta.RemoteHead, o []meta.RemoteObject) []meta.RemoteObject {
			h.RemoteEnd = 70
			return o
		}, "remote end is 70"},
		{"start", func(h *meta.RemoteHead, o []meta.RemoteObject) []meta.RemoteObject {
			return o[1:]
		}, "in no object"},
		{"epochs", func(h *meta.RemoteHead, o []meta.RemoteObject) []meta.RemoteObject {
			h.Epochs = append(h.Epochs, meta.RemoteEpoch{Epoch: 1, Start: 30})
			return o
		}, "does not follow"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hh := h
			hh.Epochs = append([]meta.RemoteEpoch(nil), h.Epochs...)
			got := tc.edit(&hh, append([]meta.RemoteObject(nil), objs...))
			ps := CheckIndex(hh, got)
			if tc.want == "" {
				if len(ps) != 0 {
					t.Fatalf("problems: %v", ps)
				}
				return
			}
			for _, pr := range ps {
				if strings.Contains(pr.String(), tc.want) {
					return
				}
			}
			t.Fatalf("problems %v, want one saying %q", ps, tc.want)
		})
	}
}

// flip inverts one byte of a stored object.
func flip(t *testing.T, store objstore.Store, key string, at int) {
	t.Helper()
	body, err := store.Get(t.Context(), key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	body[at] ^= 0xff
	if err := store.Put(t.Context(), key, body); err != nil {
		t.Fatal(err)
	}
}
