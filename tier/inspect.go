package tier

// inspect.go owns the read-only view of a partition's remote log that tools
// take (tierctl ls, verify, dump, export): listing the committed objects of
// a head and its manifests, reading an object's footer and chunks straight
// from the store (no cache, no manager), and checking objects and the index
// against each other.
//
// Invariant: nothing here writes to the store or to etcd.
//
// Stateless: functions of their arguments only; safe from any goroutine.

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier/object"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/wal"
)

// Problem is one inconsistency found by a check: in an object or manifest
// (Key), or in the head itself (Key empty).
type Problem struct {
	Key string
	Msg string
}

func (p Problem) String() string {
	if p.Key == "" {
		return "head: " + p.Msg
	}
	return p.Key + ": " + p.Msg
}

// ReadManifest reads the manifest ref names and checks it against ref: a
// level-0 manifest lists ref.Objects objects, a higher one ref.Objects
// references of lower levels, from ref.Base to ref.Next. A mismatch is
// ErrCorrupt; a missing manifest matches objstore.ErrNotFound.
func ReadManifest(ctx context.Context, store objstore.Store, ref meta.ManifestRef) ([]meta.RemoteObject, []meta.ManifestRef, error) {
	b, err := store.Get(ctx, ref.Key, 0, -1)
	if err != nil {
		return nil, nil, fmt.Errorf("tier: read manifest %s: %w", ref.Key, err)
	}
	objs, refs, err := decodeManifest(ref.Key, b)
	if err != nil {
		return nil, nil, err
	}
	n, base, next := len(objs), int64(-1), int64(-1)
	if ref.Level > 0 {
		n = len(refs)
	}
	switch {
	case ref.Level == 0 && len(objs) > 0:
		base, next = objs[0].Base, objs[len(objs)-1].Next
	case ref.Level > 0 && len(refs) > 0:
		base, next = refs[0].Base, refs[len(refs)-1].Next
	}
	if n == 0 || n != ref.Objects || base != ref.Base || next != ref.Next {
		return nil, nil, fmt.Errorf("tier: manifest %s (level %d) holds %d entries over [%d, %d), the head names %d covering [%d, %d): %w",
			ref.Key, ref.Level, n, base, next, ref.Objects, ref.Base, ref.Next, ErrCorrupt)
	}
	return objs, refs, nil
}

// ListObjects returns every committed object h names, in offset order: those
// of its manifests (read from the store), then its own. Objects below h.Clean
// are included: a manifest may still list them after they were deleted.
func ListObjects(ctx context.Context, store objstore.Store, h meta.RemoteHead) ([]meta.RemoteObject, error) {
	var out []meta.RemoteObject
	read := func(ctx context.Context, ref meta.ManifestRef) ([]meta.RemoteObject, []meta.ManifestRef, error) {
		return ReadManifest(ctx, store, ref)
	}
	if _, err := walkManifests(ctx, h.Manifests, -1, read, func(_ meta.ManifestRef, objs []meta.RemoteObject) (bool, error) {
		out = append(out, objs...)
		return false, nil
	}); err != nil {
		return nil, err
	}
	return append(out, h.Objects...), nil
}

// ReadFooter reads and parses obj's footer, trusting the size the index
// records (a second GET when the footer is longer than the first tail).
// Errors match ErrCorrupt for bad bytes and the store's errors otherwise
// (objstore.ErrNotFound for a missing object).
func ReadFooter(ctx context.Context, store objstore.Store, obj meta.RemoteObject) (*object.Footer, error) {
	f, getErr, badErr := readFooter(ctx, store, obj)
	switch {
	case getErr != nil:
		return nil, fmt.Errorf("tier: read footer of %s: %w", obj.Key, getErr)
	case badErr != nil:
		return nil, fmt.Errorf("tier: footer of %s: %w: %w", obj.Key, ErrCorrupt, badErr)
	}
	return f, nil
}

// readFooter is ReadFooter with the store's error (getErr) and the bytes'
// (badErr) apart and unadorned.
func readFooter(ctx context.Context, store objstore.Store, obj meta.RemoteObject) (f *object.Footer, getErr, badErr error) {
	if obj.Size <= 0 {
		return nil, nil, fmt.Errorf("index size %d", obj.Size)
	}
	n := min(obj.Size, object.SuggestedTailSize)
	tail, err := store.Get(ctx, obj.Key, obj.Size-n, n)
	if err != nil {
		return nil, err, nil
	}
	f, err = object.ParseFooter(tail, obj.Size)
	if errors.Is(err, object.ErrShortTail) {
		flen, terr := object.ParseTrailer(tail)
		if terr != nil {
			return nil, nil, terr
		}
		n = min(obj.Size, int64(flen)+object.TrailerSize)
		if tail, err = store.Get(ctx, obj.Key, obj.Size-n, n); err != nil {
			return nil, err, nil
		}
		f, err = object.ParseFooter(tail, obj.Size)
	}
	return f, nil, err
}

// ReadChunk reads chunk i of obj and verifies it against footer f
// (object.VerifyChunk): a mismatch is ErrCorrupt.
func ReadChunk(ctx context.Context, store objstore.Store, obj meta.RemoteObject, f *object.Footer, i int) ([]byte, error) {
	if i < 0 || i >= f.NumChunks() {
		return nil, fmt.Errorf("tier: %s: chunk %d of %d: %w", obj.Key, i, f.NumChunks(), object.ErrInvalid)
	}
	pos, n := f.ChunkRange(i)
	data, err := store.Get(ctx, obj.Key, pos, n)
	if err != nil {
		return nil, fmt.Errorf("tier: read %s chunk %d: %w", obj.Key, i, err)
	}
	if err := object.VerifyChunk(f, i, data); err != nil {
		return nil, fmt.Errorf("tier: %s chunk %d: %w: %w", obj.Key, i, ErrCorrupt, err)
	}
	return data, nil
}

// RemoteBatches calls fn with every record batch of objs (in offset order,
// as ListObjects returns them) from the one holding from, until fn returns
// an error or the objects end. Every chunk is verified before its batches
// are handed on. fn's error ErrStop ends the walk with nil.
func RemoteBatches(ctx context.Context, store objstore.Store, objs []meta.RemoteObject, from wal.Offset, fn func(batch []byte) error) error {
	for _, o := range objs {
		if o.Next <= int64(from) {
			continue
		}
		f, err := ReadFooter(ctx, store, o)
		if err != nil {
			return err
		}
		i, ok := f.ChunkFor(from)
		if !ok && from < f.BaseOffset {
			i, ok = 0, true
		}
		for ; ok && i < f.NumChunks(); i++ {
			data, err := ReadChunk(ctx, store, o, f, i)
			if err != nil {
				return err
			}
			tail, err := object.SliceFrom(data, from)
			if err != nil {
				return fmt.Errorf("tier: %s chunk %d: %w: %w", o.Key, i, ErrCorrupt, err)
			}
			if err := object.Batches(tail, fn); err != nil {
				if errors.Is(err, ErrStop) {
					return nil
				}
				return err
			}
		}
	}
	return nil
}

// ErrStop, returned by a RemoteBatches callback, ends the walk early.
var ErrStop = errors.New("tier: stop")

// CheckIndex checks a head and the objects ListObjects returned for it
// without reading any object: watermarks in order, every key naming an
// object of h's partition at its base, objects contiguous (gaps wholly below
// the log start excepted) from at most the log start to the remote end, and
// the epoch chain strictly increasing.
func CheckIndex(h meta.RemoteHead, objs []meta.RemoteObject) []Problem {
	var out []Problem
	add := func(key, format string, args ...any) {
		out = append(out, Problem{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if h.Clean > h.LogStart || h.LogStart > h.RemoteEnd || h.PendingClean > h.LogStart {
		add("", "watermarks out of order: clean %d, pending clean %d, log start %d, remote end %d", h.Clean, h.PendingClean, h.LogStart, h.RemoteEnd)
	}
	for i, o := range objs {
		if o.Next <= o.Base || o.Size <= 0 {
			add(o.Key, "index entry [%d, %d) of %d bytes is empty", o.Base, o.Next, o.Size)
		}
		if i > 0 && gapOrOverlap(h, objs[i-1].Next, o.Base) {
			add(o.Key, "starts at %d, the previous object ends at %d", o.Base, objs[i-1].Next)
		}
		if k, ok := ParseKey(o.Key); !ok || k.Manifest || k.TopicID != h.TopicID || k.Partition != h.Partition || int64(k.Base) != o.Base {
			add(o.Key, "key does not name an object of this partition at %d", o.Base)
		}
	}
	switch {
	case len(objs) > 0 && objs[len(objs)-1].Next != h.RemoteEnd:
		add("", "objects end at %d, remote end is %d", objs[len(objs)-1].Next, h.RemoteEnd)
	case len(objs) > 0 && objs[0].Base > h.LogStart:
		add("", "objects start at %d, above the log start %d: offsets [%d, %d) are in no object", objs[0].Base, h.LogStart, h.LogStart, objs[0].Base)
	case len(objs) == 0 && h.RemoteEnd > h.LogStart:
		add("", "no objects, but the remote log is [%d, %d)", h.LogStart, h.RemoteEnd)
	}
	for i := 1; i < len(h.Epochs); i++ {
		if h.Epochs[i].Epoch <= h.Epochs[i-1].Epoch || h.Epochs[i].Start <= h.Epochs[i-1].Start {
			add("", "epoch chain entry %d (%d at %d) does not follow (%d at %d)", i, h.Epochs[i].Epoch, h.Epochs[i].Start, h.Epochs[i-1].Epoch, h.Epochs[i-1].Start)
		}
	}
	return out
}

// gapOrOverlap reports whether an object starting at base after one ending
// at prevNext breaks the tiling. A gap wholly below the log start is not a
// problem: when total retention passed offsets before they were uploaded,
// the remote log continues at the local start (upload.go) and the objects
// below wait for the clean-up.
func gapOrOverlap(h meta.RemoteHead, prevNext, base int64) bool {
	return base < prevNext || (base > prevNext && base > h.LogStart)
}

// VerifyObject reads obj whole and checks it: it exists with the size the
// index records, its footer parses and covers the index entry's range, every
// chunk matches its CRC and entry, the producer snapshot its CRC, it starts
// at prevNext (the previous object's end; -1 to skip), and its epoch entries
// agree with h's epoch chain over its range. Every problem is returned.
func VerifyObject(ctx context.Context, store objstore.Store, h meta.RemoteHead, obj meta.RemoteObject, prevNext int64) []Problem {
	var out []Problem
	add := func(format string, args ...any) {
		out = append(out, Problem{Key: obj.Key, Msg: fmt.Sprintf(format, args...)})
	}
	if prevNext >= 0 && gapOrOverlap(h, prevNext, obj.Base) {
		add("starts at %d, the previous object ends at %d", obj.Base, prevNext)
	}
	info, err := store.Head(ctx, obj.Key)
	if err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			add("missing from the store")
		} else {
			add("head: %v", err)
		}
		return out
	}
	if info.Size != obj.Size {
		add("%d bytes in the store, the index says %d", info.Size, obj.Size)
		return out
	}
	f, getErr, badErr := readFooter(ctx, store, obj)
	switch {
	case getErr != nil:
		add("read the footer: %v", getErr)
		return out
	case badErr != nil:
		add("footer: %v", badErr)
		return out
	}
	if f.BaseOffset != wal.Offset(obj.Base) || f.NextOffset != wal.Offset(obj.Next) {
		add("holds [%d, %d), the index says [%d, %d)", f.BaseOffset, f.NextOffset, obj.Base, obj.Next)
	}
	if f.TopicID != h.TopicID || f.Partition != h.Partition {
		add("footer names partition %d of another topic or partition", f.Partition)
	}
	if ts := f.MaxTimestamp(); ts != obj.MaxTs {
		add("max timestamp %d, the index says %d", ts, obj.MaxTs)
	}
	for i := range f.NumChunks() {
		pos, n := f.ChunkRange(i)
		data, err := store.Get(ctx, obj.Key, pos, n)
		if err == nil {
			err = object.VerifyChunk(f, i, data)
		} else {
			err = fmt.Errorf("read chunk %d: %w", i, err)
		}
		if err != nil {
			add("%v", err)
		}
	}
	if pos, n := f.SnapshotRange(); n > 0 {
		snap, err := store.Get(ctx, obj.Key, pos, n)
		if err == nil {
			err = object.VerifySnapshot(f, snap)
		}
		if err != nil {
			add("producer snapshot: %v", err)
		}
	}
	for _, msg := range epochMismatches(f, h.Epochs) {
		add("%s", msg)
	}
	return out
}

// epochMismatches compares the epochs f records over its range with the
// head's chain: at every offset where either changes epoch, both must say
// the same.
func epochMismatches(f *object.Footer, chain []meta.RemoteEpoch) []string {
	at := func(off wal.Offset) (int32, bool) {
		e, ok := int32(-1), false
		for _, c := range chain {
			if c.Start > int64(off) {
				break
			}
			e, ok = c.Epoch, true
		}
		return e, ok
	}
	points := []wal.Offset{}
	for _, e := range f.Epochs() {
		points = append(points, e.StartOffset)
	}
	for _, c := range chain {
		if c.Start > int64(f.BaseOffset) && c.Start < int64(f.NextOffset) {
			points = append(points, wal.Offset(c.Start))
		}
	}
	var out []string
	for _, p := range points {
		want, ok := f.EpochFor(p)
		got, inChain := at(p)
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("no epoch in the footer at %d", p))
		case !inChain:
			out = append(out, fmt.Sprintf("the head's epoch chain does not cover offset %d (footer: epoch %d)", p, want))
		case got != int32(want):
			out = append(out, fmt.Sprintf("epoch %d at offset %d, the head's chain says %d", want, p, got))
		}
	}
	return out
}
