package ref

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
)

func sample() Ref {
	return Ref{ID: "u7f3k2m9x", Size: 104857600, SHA256: SumHex(sha256.Sum256([]byte("x"))), ContentType: "application/pdf"}
}

func TestRoundTrip(t *testing.T) {
	for _, r := range []Ref{
		sample(),
		{ID: "a", Size: 0, SHA256: SumHex(sha256.Sum256(nil))},
		{ID: strings.Repeat("Z", MaxIDLen), Size: MaxSize, SHA256: SumHex(sha256.Sum256(nil)), KeyID: "kms:alias/orders", Algorithm: "AES-256-GCM"},
	} {
		if err := r.Validate(); err != nil {
			t.Fatalf("Validate(%+v): %v", r, err)
		}
		got, ok, err := Parse(r.Headers())
		if err != nil || !ok || got != r {
			t.Fatalf("Parse(Headers(%+v)) = %+v, %v, %v", r, got, ok, err)
		}
	}
}

func TestInlineRecordIsNotAnEnvelope(t *testing.T) {
	r, ok, err := Parse([]Header{{"trace-id", []byte("abc")}, {"sluicex", nil}})
	if ok || err != nil || r != (Ref{}) {
		t.Fatalf("Parse of an inline record's headers = %+v, %v, %v", r, ok, err)
	}
}

func TestParseRefuses(t *testing.T) {
	good := sample().Headers()
	with := func(key, value string) []Header {
		var hs []Header
		for _, h := range good {
			if h.Key == key {
				if value == "\x00drop" {
					continue
				}
				h.Value = []byte(value)
			}
			hs = append(hs, h)
		}
		return hs
	}
	cases := map[string][]Header{
		"missing ref":        with(HeaderRef, "\x00drop"),
		"missing size":       with(HeaderSize, "\x00drop"),
		"missing sha256":     with(HeaderSHA256, "\x00drop"),
		"empty ref":          with(HeaderRef, ""),
		"ref with slash":     with(HeaderRef, "../other"),
		"ref too long":       with(HeaderRef, strings.Repeat("a", MaxIDLen+1)),
		"negative size":      with(HeaderSize, "-1"),
		"size with plus":     with(HeaderSize, "+5"),
		"size leading zero":  with(HeaderSize, "05"),
		"size not a number":  with(HeaderSize, "lots"),
		"size empty":         with(HeaderSize, ""),
		"size too big":       with(HeaderSize, "1099511627777"),
		"sha256 upper hex":   with(HeaderSHA256, strings.ToUpper(sample().SHA256)),
		"sha256 short":       with(HeaderSHA256, "abcd"),
		"content type ctrl":  with(HeaderContentType, "text/plain\n"),
		"duplicate ref":      append(append([]Header{}, good...), Header{HeaderRef, []byte("b")}),
		"only optional head": {{HeaderContentType, []byte("text/plain")}},
	}
	for name, hs := range cases {
		_, ok, err := Parse(hs)
		if !ok || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Parse = ok %v, err %v; want an envelope refused as malformed", name, ok, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	enc := func(hs []Header) []byte {
		var b []byte
		for _, h := range hs {
			b = append(b, h.Key...)
			b = append(b, '=')
			b = append(b, h.Value...)
			b = append(b, '\n')
		}
		return b
	}
	f.Add(enc(sample().Headers()))
	f.Add([]byte("sluice.ref=a\nsluice.size=0\n"))
	f.Add([]byte("sluice.size=99999999999999999999\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var hs []Header
		for _, line := range strings.Split(string(data), "\n") {
			k, v, _ := strings.Cut(line, "=")
			hs = append(hs, Header{k, []byte(v)})
		}
		r, ok, err := Parse(hs)
		if err != nil {
			if !ok || !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v with ok %v", err, ok)
			}
			return
		}
		if !ok {
			return
		}
		if verr := r.Validate(); verr != nil {
			t.Fatalf("Parse accepted an invalid ref %+v: %v", r, verr)
		}
		back, ok2, err2 := Parse(r.Headers())
		if err2 != nil || !ok2 || back != r {
			t.Fatalf("round trip of %+v = %+v, %v, %v", r, back, ok2, err2)
		}
	})
}
