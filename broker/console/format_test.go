package console

import (
	"strings"
	"testing"

	"unicode/utf8"
)

func TestShowFormats(t *testing.T) {
	for _, tc := range []struct {
		in, format, wantFormat, wantText, wantNote string
	}{
		{`{"a":1}`, "json", "json", "{\n  \"a\": 1\n}", ""},
		{`not json`, "json", "text", "not json", "not JSON"},
		{"plain", "text", "text", "plain", ""},
		{"\xff\x00", "text", "hex", "00000000  ff 00", "not UTF-8 text"},
		{"ab", "hex", "hex", "00000000  61 62", ""},
	} {
		got := show([]byte(tc.in), tc.format)
		if got.Format != tc.wantFormat || !strings.HasPrefix(got.Text, tc.wantText) || got.Note != tc.wantNote {
			t.Errorf("show(%q, %s) = %+v, want format %s text %q note %q", tc.in, tc.format, got, tc.wantFormat, tc.wantText, tc.wantNote)
		}
	}
	big := show([]byte(strings.Repeat("x", maxShownBytes+10)), "json")
	if len(big.Text) != maxShownBytes || !strings.Contains(big.Note, "first 16384 of 16394 bytes") {
		t.Errorf("a large value: %d bytes shown, note %q", len(big.Text), big.Note)
	}
}

func TestParseTime(t *testing.T) {
	for in, want := range map[string]int64{
		"1764680400000":        1764680400000,
		"2025-12-02T13:00:00Z": 1764680400000,
		"2025-12-02T13:00":     1764680400000,
	} {
		got, err := parseTime(in)
		if err != nil || got.UnixMilli() != want {
			t.Errorf("parseTime(%q) = %v, %v; want %d", in, got, err, want)
		}
	}
	if _, err := parseTime("yesterday"); err == nil || !strings.Contains(err.Error(), "RFC 3339") {
		t.Errorf("parseTime(yesterday): %v", err)
	}
}

// FuzzShow: any record bytes in any format render without a panic, as
// valid UTF-8 (the page's encoding), bounded.
func FuzzShow(f *testing.F) {
	for _, s := range []string{`{"a":[1,2]}`, "\xff\xfe", "", "text\n", strings.Repeat("{", 100)} {
		f.Add([]byte(s), "json")
		f.Add([]byte(s), "hex")
	}
	f.Fuzz(func(t *testing.T, b []byte, format string) {
		got := show(b, format)
		if !utf8.ValidString(got.Text) {
			t.Fatalf("show(%q, %q) is not UTF-8: %q", b, format, got.Text)
		}
		if len(got.Text) > 5*maxShownBytes {
			t.Fatalf("show of %d bytes gave %d", len(b), len(got.Text))
		}
		_, _ = parseTime(string(b))
	})
}
