package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// TestOverlayLeavesTheDiskAlone drives every changing operation of the view
// and checks that the view shows them while the disk does not change.
func TestOverlayLeavesTheDiskAlone(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.log", "abcdef")
	write("a.index", "index")
	write("stray.tmp", "tmp")
	o := newOverlayFS(vfs.OS)
	p := func(n string) string { return filepath.Join(dir, n) }

	// A segment opened for appending reads the disk until it changes.
	f, err := o.OpenFile(p("a.log"), os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "abcdef" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if err := f.Truncate(2); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("XY")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.Size(); n != 4 {
		t.Fatalf("view size %d", n)
	}
	f.Close()
	// A file replaced through a temporary file and a rename; one removed.
	if err := vfs.WriteFile(o, p("a.index"), []byte("new index")); err != nil {
		t.Fatal(err)
	}
	if err := o.Remove(p("stray.tmp")); err != nil {
		t.Fatal(err)
	}
	if err := o.MkdirAll(p("sub/dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	g, err := o.Create(p("sub/dir/new.log"))
	if err != nil {
		t.Fatal(err)
	}
	g.Close()

	names, err := o.ReadDir(dir)
	if err != nil || !slices.Equal(names, []string{"a.index", "a.log", "sub"}) {
		t.Fatalf("view lists %v, %v", names, err)
	}
	if _, err := o.Stat(p("stray.tmp")); !os.IsNotExist(err) {
		t.Fatalf("a removed file is still in the view: %v", err)
	}
	if fi, err := o.Stat(p("sub/dir/new.log")); err != nil || fi.Size() != 0 {
		t.Fatalf("created file: %v", err)
	}
	r, err := o.Open(p("a.index"))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 9)
	if _, err := r.ReadAt(got, 0); err != nil || string(got) != "new index" {
		t.Fatalf("view reads %q, %v", got, err)
	}
	r.Close()

	disk, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var onDisk []string
	for _, e := range disk {
		onDisk = append(onDisk, e.Name())
	}
	if !slices.Equal(onDisk, []string{"a.index", "a.log", "stray.tmp"}) {
		t.Fatalf("the disk changed: %v", onDisk)
	}
	for name, want := range map[string]string{"a.log": "abcdef", "a.index": "index", "stray.tmp": "tmp"} {
		if b, err := os.ReadFile(p(name)); err != nil || string(b) != want {
			t.Fatalf("%s on disk is %q, %v", name, b, err)
		}
	}
	ch := strings.Join(o.Changes(), "; ")
	if ch != "a.log: cut at byte 2" {
		t.Fatalf("changes: %s", ch)
	}
	if _, err := o.OpenFile(p("a.log"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); !os.IsExist(err) {
		t.Fatalf("O_EXCL on an existing file: %v", err)
	}
	if _, err := o.Open(p("missing")); !os.IsNotExist(err) {
		t.Fatalf("open of a missing file: %v", err)
	}
}

func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		args []string
		pos  []string
		n    int
	}{
		{[]string{"a", "--n", "3", "b"}, []string{"a", "b"}, 3},
		{[]string{"--n=4", "a"}, []string{"a"}, 4},
		{[]string{"a", "--", "--n", "5"}, []string{"a", "--n", "5"}, 0},
		{nil, nil, 0},
	}
	for _, tc := range tests {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		n := fs.Int("n", 0, "")
		pos, err := parseInterspersed(fs, tc.args, io.Discard, io.Discard)
		if err != nil || !slices.Equal(pos, tc.pos) || *n != tc.n {
			t.Fatalf("%v: %v n=%d, %v; want %v n=%d", tc.args, pos, *n, err, tc.pos, tc.n)
		}
	}
}
