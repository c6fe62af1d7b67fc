package open_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/file"
	"github.com/sluice-mq/sluice/tier/objstore/mem"
	"github.com/sluice-mq/sluice/tier/objstore/open"
	"github.com/sluice-mq/sluice/tier/objstore/s3"
	"github.com/sluice-mq/sluice/tier/objstore/s3test"
)

func TestSchemes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "objects", "new")
	tests := []struct {
		url  string
		want func(objstore.Store) bool
	}{
		{"file://" + dir, func(s objstore.Store) bool { _, ok := s.(*file.Store); return ok }},
		{"file://localhost" + dir, func(s objstore.Store) bool { _, ok := s.(*file.Store); return ok }},
		{"mem://", func(s objstore.Store) bool { _, ok := s.(*mem.Store); return ok }},
		{"mem:", func(s objstore.Store) bool { _, ok := s.(*mem.Store); return ok }},
		{"s3://bucket/prefix?endpoint=http://127.0.0.1:1&region=us-east-1", func(s objstore.Store) bool { _, ok := s.(*s3.Store); return ok }},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			s, err := open.URL(t.Context(), tc.url, objstore.Options{})
			if err != nil || !tc.want(s) {
				t.Fatalf("URL(%q) = %T, %v", tc.url, s, err)
			}
		})
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("file:// did not create %s: %v", dir, err)
	}
}

func TestRejects(t *testing.T) {
	for _, raw := range []string{
		"",
		"/abs/path",
		"ftp://host/x",
		"file://relative/path",
		"file:relative",
		"file:///abs?x=1",
		"mem://shared",
		"mem:///name",
		"s3://",
		"s3://b/p?bogus=1",
		"s3://b/p?endpoint=nohost",
		"%zz://x",
	} {
		if s, err := open.URL(t.Context(), raw, objstore.Options{}); err == nil {
			t.Errorf("URL(%q) = %T, want an error", raw, s)
		}
	}
	if _, err := open.URL(t.Context(), "mem://", objstore.Options{Timeout: -1}); err == nil {
		t.Error("URL with invalid options succeeded")
	}
}

func TestMemIsFresh(t *testing.T) {
	a, err := open.URL(t.Context(), "mem://", objstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	b, err := open.URL(t.Context(), "mem://", objstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Head(t.Context(), "k"); err == nil {
		t.Fatal("two mem:// stores share objects")
	}
}

// TestS3 opens the test server's URL and round-trips an object.
func TestS3(t *testing.T) {
	srv := s3test.Start(t)
	s, err := open.URL(t.Context(), srv.URL("open/test"), srv.Options())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(t.Context(), "k", 0, -1); err != nil || string(got) != "v" {
		t.Fatalf("Get = %q, %v", got, err)
	}
}
