package tier

// manifest.go owns manifests: immutable objects in the bucket that list a
// partition's older committed objects, so the head in etcd stays small
// (tier/doc.go draws the JSON, version 1), and the spill that moves the
// oldest entries of a head into a new manifest.
//
// Invariant: a manifest is written (one PUT, fresh key) before the head that
// names it, and never changed; a head write that loses leaves it an orphan.
// Invariant: the objects of a head's manifests and of the head itself are in
// offset order, manifests first, and tile [LogStart, RemoteEnd); below the
// log start there may be gaps (offsets retention passed before upload).

import (
	"encoding/json"
	"fmt"

	"github.com/sluice-mq/sluice/meta"
)

const manifestVersion = 1

// manifest is the stored form.
type manifest struct {
	V       int                 `json:"v"`
	Objects []meta.RemoteObject `json:"objects"`
}

func encodeManifest(objs []meta.RemoteObject) ([]byte, error) {
	return json.Marshal(manifest{V: manifestVersion, Objects: objs})
}

func decodeManifest(key string, b []byte) ([]meta.RemoteObject, error) {
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("tier: manifest %s: %w: %w", key, ErrCorrupt, err)
	}
	if m.V != manifestVersion {
		return nil, fmt.Errorf("tier: manifest %s: version %d: %w", key, m.V, ErrCorrupt)
	}
	// Objects increase and never overlap. A gap is possible: retention may
	// pass offsets that were never uploaded, and the remote log continues
	// above them (upload.go); everything below the log start is only
	// waiting for its clean-up.
	for i, o := range m.Objects {
		if o.Next <= o.Base || (i > 0 && o.Base < m.Objects[i-1].Next) {
			return nil, fmt.Errorf("tier: manifest %s: object [%d, %d) out of order: %w", key, o.Base, o.Next, ErrCorrupt)
		}
	}
	return m.Objects, nil
}
