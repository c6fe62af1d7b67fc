package frames

import "testing"

func TestSkipTags(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		rest []byte // nil: an error
	}{
		{"no tags", []byte{0, 7, 8}, []byte{7, 8}},
		{"one tag", []byte{1, 5, 2, 0xa, 0xb, 9}, []byte{9}},
		{"two tags", []byte{2, 0, 0, 1, 1, 0xc, 9}, []byte{9}},
		{"empty", nil, nil},
		{"truncated count", []byte{0x80}, nil},
		{"too many tags", []byte{65}, nil},
		{"missing key", []byte{1}, nil},
		{"missing length", []byte{1, 5}, nil},
		{"length past the end", []byte{1, 5, 3, 0xa}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rest, err := SkipTags(tc.in)
			if tc.rest == nil {
				if err == nil {
					t.Fatalf("SkipTags(%x) = %x, want an error", tc.in, rest)
				}
				return
			}
			if err != nil || string(rest) != string(tc.rest) {
				t.Fatalf("SkipTags(%x) = %x, %v; want %x", tc.in, rest, err, tc.rest)
			}
		})
	}
}

func FuzzSkipTags(f *testing.F) {
	f.Add([]byte{1, 5, 2, 0xa, 0xb, 9})
	f.Add([]byte{2, 0, 0, 1, 1, 0xc})
	f.Fuzz(func(t *testing.T, b []byte) {
		rest, err := SkipTags(b)
		if err == nil && len(rest) > len(b) {
			t.Fatalf("rest %d bytes of %d", len(rest), len(b))
		}
	})
}
