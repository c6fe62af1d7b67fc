package tier

import (
	"testing"

	"github.com/sluice-mq/sluice/meta"
)

// FuzzDecodeManifest: a manifest read from the bucket is outside bytes. It
// decodes or fails with ErrCorrupt, never panics, and what decodes is in
// order and re-encodes to a manifest that decodes the same.
func FuzzDecodeManifest(f *testing.F) {
	good, _ := encodeManifest([]meta.RemoteObject{{Key: "a", Base: 0, Next: 10, Size: 100}, {Key: "b", Base: 10, Next: 20, Size: 100}})
	f.Add(good)
	f.Add([]byte(`{"v":1,"objects":[]}`))
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`{"v":1,"objects":[{"base":5,"next":3}]}`))
	f.Add([]byte(`{"v":1,"manifests":[{"key":"m","base":0,"next":10,"objects":2,"level":1}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		objs, refs, err := decodeManifest("k", b)
		if err != nil {
			return
		}
		if len(objs) > 0 && len(refs) > 0 {
			t.Fatalf("decoded both objects and references")
		}
		for i, o := range objs {
			if o.Next <= o.Base || (i > 0 && o.Base < objs[i-1].Next) {
				t.Fatalf("decoded out of order: %+v", objs)
			}
		}
		for i, r := range refs {
			if r.Next <= r.Base || r.Level < 0 || r.Level >= maxManifestLevel || (i > 0 && r.Base < refs[i-1].Next) {
				t.Fatalf("decoded references out of order: %+v", refs)
			}
		}
		again, err := encodeManifest(objs)
		if len(refs) > 0 {
			again, err = encodeIndexManifest(refs)
		}
		if err != nil {
			t.Fatal(err)
		}
		o2, r2, err := decodeManifest("k", again)
		if err != nil || len(o2) != len(objs) || len(r2) != len(refs) {
			t.Fatalf("re-encoded manifest: %v, %d objects and %d references, want %d and %d", err, len(o2), len(r2), len(objs), len(refs))
		}
	})
}

// FuzzParseKey: keys listed from the bucket are outside strings; a key
// that parses is rebuilt from its parts with the same prefix.
func FuzzParseKey(f *testing.F) {
	f.Add(objectKey([16]byte{1}, 3, 100, 2))
	f.Add(manifestKey([16]byte{1}, 3, 100))
	f.Add("0000/x/y/z")
	f.Fuzz(func(t *testing.T, key string) {
		info, ok := ParseKey(key)
		if !ok {
			return
		}
		if info.Partition < 0 || info.Base < 0 && !info.Manifest {
			t.Fatalf("parsed %q to %+v", key, info)
		}
		if got := partitionPrefix(info.TopicID, info.Partition); len(key) < len(got) || key[:len(got)] != got {
			t.Fatalf("%q parsed to %+v whose prefix is %q", key, info, got)
		}
	})
}
