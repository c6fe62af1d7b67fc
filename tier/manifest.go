package tier

// manifest.go owns manifests: immutable objects in the bucket that list a
// partition's older committed objects, so the head in etcd stays small
// (tier/doc.go draws the JSON, version 1), and the spill that moves the
// oldest entries of a head into a new manifest.
//
// Invariant: a manifest is written (one PUT, fresh key) before the head that
// names it, and never changed; a head write that loses leaves it an orphan.
// Invariant: the objects of a head's manifests and of the head itself tile
// [Clean, RemoteEnd) in offset order, manifests first.

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
		return nil, fmt.Errorf("tier: manifest %s: %w: %v", key, ErrCorrupt, err)
	}
	if m.V != manifestVersion {
		return nil, fmt.Errorf("tier: manifest %s: version %d: %w", key, m.V, ErrCorrupt)
	}
	for i := 1; i < len(m.Objects); i++ {
		if m.Objects[i].Base != m.Objects[i-1].Next {
			return nil, fmt.Errorf("tier: manifest %s: objects not contiguous at %d: %w", key, m.Objects[i].Base, ErrCorrupt)
		}
	}
	return m.Objects, nil
}
