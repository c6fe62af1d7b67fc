package tier

// manifest.go owns manifests: immutable objects in the bucket that list a
// partition's older committed objects (level 0) or older manifests (higher
// levels), so the head in etcd stays small however long the log (tier/doc.go
// draws the JSON, version 1); the merge that moves the oldest references of
// a head into a new manifest one level up; and the walk over the tree.
//
// Invariant: a manifest is written (one PUT, fresh key) before the head that
// names it, and never changed; a head write that loses leaves it an orphan.
// Invariant: the objects of a head's manifests and of the head itself are in
// offset order, manifests first, and tile [LogStart, RemoteEnd); below the
// log start there may be gaps (offsets retention passed before upload).

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/wal"
)

const manifestVersion = 1

// maxManifestLevel bounds the nesting a reader follows: each level merges
// MaxManifestsInHead/2 references, so ten levels are far beyond any log.
const maxManifestLevel = 10

// manifest is the stored form: a level-0 manifest lists objects, a higher
// one lists manifest references.
type manifest struct {
	V         int                 `json:"v"`
	Objects   []meta.RemoteObject `json:"objects,omitempty"`
	Manifests []meta.ManifestRef  `json:"manifests,omitempty"`
}

func encodeManifest(objs []meta.RemoteObject) ([]byte, error) {
	return json.Marshal(manifest{V: manifestVersion, Objects: objs})
}

func encodeIndexManifest(refs []meta.ManifestRef) ([]byte, error) {
	return json.Marshal(manifest{V: manifestVersion, Manifests: refs})
}

// decodeManifest decodes a manifest: its objects (level 0) or its
// references (higher levels), checked to be in order.
func decodeManifest(key string, b []byte) ([]meta.RemoteObject, []meta.ManifestRef, error) {
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, nil, fmt.Errorf("tier: manifest %s: %w: %w", key, ErrCorrupt, err)
	}
	if m.V != manifestVersion {
		return nil, nil, fmt.Errorf("tier: manifest %s: version %d: %w", key, m.V, ErrCorrupt)
	}
	if len(m.Objects) > 0 && len(m.Manifests) > 0 {
		return nil, nil, fmt.Errorf("tier: manifest %s lists both objects and manifests: %w", key, ErrCorrupt)
	}
	// Entries increase and never overlap. A gap is possible: retention may
	// pass offsets that were never uploaded, and the remote log continues
	// above them (upload.go); everything below the log start is only
	// waiting for its clean-up.
	for i, o := range m.Objects {
		if o.Next <= o.Base || (i > 0 && o.Base < m.Objects[i-1].Next) {
			return nil, nil, fmt.Errorf("tier: manifest %s: object [%d, %d) out of order: %w", key, o.Base, o.Next, ErrCorrupt)
		}
	}
	for i, r := range m.Manifests {
		if r.Next <= r.Base || r.Level < 0 || r.Level >= maxManifestLevel || (i > 0 && r.Base < m.Manifests[i-1].Next) {
			return nil, nil, fmt.Errorf("tier: manifest %s: reference [%d, %d) level %d out of order: %w", key, r.Base, r.Next, r.Level, ErrCorrupt)
		}
	}
	return m.Objects, m.Manifests, nil
}

// readManifestFunc reads one manifest: its objects or its references.
type readManifestFunc func(ctx context.Context, ref meta.ManifestRef) ([]meta.RemoteObject, []meta.ManifestRef, error)

// walkManifests visits, in offset order, every manifest under refs whose
// range ends above from (depth first: a reference before what it lists),
// with the objects of the level-0 ones. visit returns stop to end the walk.
func walkManifests(ctx context.Context, refs []meta.ManifestRef, from int64, read readManifestFunc,
	visit func(ref meta.ManifestRef, objs []meta.RemoteObject) (stop bool, err error)) (bool, error) {
	for _, ref := range refs {
		if ref.Next <= from {
			continue
		}
		objs, children, err := read(ctx, ref)
		if err != nil {
			return false, err
		}
		if ref.Level > 0 && len(objs) > 0 || ref.Level == 0 && len(children) > 0 || ref.Level >= maxManifestLevel {
			return false, fmt.Errorf("tier: manifest %s at level %d lists %d objects and %d manifests: %w", ref.Key, ref.Level, len(objs), len(children), ErrCorrupt)
		}
		if stop, err := visit(ref, objs); stop || err != nil {
			return stop, err
		}
		for _, c := range children {
			if c.Level >= ref.Level {
				return false, fmt.Errorf("tier: manifest %s at level %d names %s at level %d: %w", ref.Key, ref.Level, c.Key, c.Level, ErrCorrupt)
			}
		}
		if stop, err := walkManifests(ctx, children, from, read, visit); stop || err != nil {
			return stop, err
		}
	}
	return false, nil
}

// mergeManifests moves the oldest half of a head's manifest references into
// a new manifest one level up once the head holds more than most, so the
// head stays small however long the log: the references form a tree.
func (m *Manager) mergeManifests(ctx context.Context, h meta.RemoteHead, most int) (meta.RemoteHead, error) {
	if len(h.Manifests) <= most {
		return h, nil
	}
	moved := h.Manifests[:len(h.Manifests)/2]
	body, err := encodeIndexManifest(moved)
	if err != nil {
		return h, err
	}
	ref := meta.ManifestRef{Key: manifestKey(h.TopicID, h.Partition, wal.Offset(moved[0].Base)),
		Base: moved[0].Base, Next: moved[len(moved)-1].Next, Objects: len(moved)}
	for _, r := range moved {
		ref.Level = max(ref.Level, r.Level+1)
		ref.MaxTs = max(ref.MaxTs, r.MaxTs)
	}
	putCtx, cancel := context.WithTimeout(ctx, m.cfg.PutTimeout)
	defer cancel()
	if err := m.cfg.Store.Put(putCtx, ref.Key, body); err != nil {
		return h, fmt.Errorf("tier: put manifest %s: %w", ref.Key, err)
	}
	h.Manifests = append([]meta.ManifestRef{ref}, slices.Clone(h.Manifests[len(moved):])...)
	return h, nil
}
