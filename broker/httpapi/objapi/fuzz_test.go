package objapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzDecodeBegin feeds outside bytes to the session API's JSON decoding:
// nothing panics, and a request that decodes has a topic, a positive size
// and a sha256, and encodes to JSON that decodes to the same request (the
// pipeline's authorise stage rewrites it so).
func FuzzDecodeBegin(f *testing.F) {
	for _, seed := range []string{
		`{"topic":"big","size":104857600,"sha256":"` + strings.Repeat("a", 64) + `","content_type":"application/pdf"}`,
		`{"topic":"t","size":1,"sha256":"x","enc_key_id":"k1","enc_alg":"AES-256-GCM"}`,
		`{"topic":"t","size":-1,"sha256":"x"}`, `{"topic":"t","size":1e3,"sha256":"x"}`,
		`{"topic":"t","size":1,"sha256":"x","extra":true}`, `{"topic":"t","size":1,"sha256":"x"} {}`,
		`{"size":"10"}`, `[]`, `null`, `{`, ``, `{"topic":"\u0000","size":9223372036854775807,"sha256":"x"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeBegin(bytes.NewReader(body))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("a refusal without a message")
			}
			return
		}
		if req.Topic == "" || req.Size <= 0 || req.SHA256 == "" {
			t.Fatalf("accepted %+v", req)
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeBegin(bytes.NewReader(again))
		if err != nil || back != req {
			t.Fatalf("%+v encodes to %s, which decodes to %+v, %v", req, again, back, err)
		}
	})
}

// FuzzParseRanges: Content-Range and Range parsing never panic and answer
// only ranges inside their bounds.
func FuzzParseRanges(f *testing.F) {
	for _, seed := range []string{"bytes 0-99/100", "bytes 5-4/10", "bytes 0-9/*", "bytes=0-", "bytes=-5", "bytes=3-2",
		"bytes=0-1,4-5", "bytes=99999999999999999999-", "items=0-1", ""} {
		f.Add(seed, int64(100))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if off, n, total, err := ParseContentRange(h); err == nil {
			if off < 0 || n <= 0 || (total >= 0 && off+n > total) {
				t.Fatalf("Content-Range %q: off %d, n %d, total %d", h, off, n, total)
			}
		}
		if size < 0 {
			return
		}
		if off, n, ok, err := ParseRange(h, size); ok && err == nil {
			if off < 0 || n <= 0 || off+n > size {
				t.Fatalf("Range %q of %d: off %d, n %d", h, size, off, n)
			}
		}
	})
}
