package vfs

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"testing"
)

func write(t *testing.T, f File, s string) {
	t.Helper()
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func content(t *testing.T, fs FS, name string) (string, bool) {
	t.Helper()
	f, err := fs.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, _ := f.Size()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return string(b), true
}

func TestMemCrashKeepsOnlySyncedState(t *testing.T) {
	cases := []struct {
		name   string
		script func(t *testing.T, m *Mem)
		want   map[string]string // name -> content; absent names must not exist
	}{
		{"unsynced create is lost", func(t *testing.T, m *Mem) {
			f, _ := m.Create("/d/a")
			write(t, f, "x")
			f.Sync()
		}, map[string]string{}},
		{"synced dir, unsynced data", func(t *testing.T, m *Mem) {
			f, _ := m.Create("/d/a")
			m.SyncDir("/d")
			write(t, f, "x")
		}, map[string]string{"/d/a": ""}},
		{"synced data and dir", func(t *testing.T, m *Mem) {
			f, _ := m.Create("/d/a")
			write(t, f, "abc")
			f.Sync()
			write(t, f, "def")
			m.SyncDir("/d")
		}, map[string]string{"/d/a": "abc"}},
		{"unsynced remove is undone", func(t *testing.T, m *Mem) {
			f, _ := m.Create("/d/a")
			write(t, f, "abc")
			f.Sync()
			m.SyncDir("/d")
			m.Remove("/d/a")
		}, map[string]string{"/d/a": "abc"}},
		{"synced remove", func(t *testing.T, m *Mem) {
			f, _ := m.Create("/d/a")
			f.Sync()
			m.SyncDir("/d")
			m.Remove("/d/a")
			m.SyncDir("/d")
		}, map[string]string{}},
		{"rename needs dir sync", func(t *testing.T, m *Mem) {
			f, _ := m.Create("/d/a.tmp")
			write(t, f, "new")
			f.Sync()
			m.SyncDir("/d")
			m.Rename("/d/a.tmp", "/d/a")
		}, map[string]string{"/d/a.tmp": "new"}},
		{"rename synced", func(t *testing.T, m *Mem) {
			f, _ := m.Create("/d/a.tmp")
			write(t, f, "new")
			f.Sync()
			m.Rename("/d/a.tmp", "/d/a")
			m.SyncDir("/d")
		}, map[string]string{"/d/a": "new"}},
		{"truncate after sync is lost", func(t *testing.T, m *Mem) {
			f, _ := m.Create("/d/a")
			write(t, f, "abcdef")
			f.Sync()
			m.SyncDir("/d")
			f.Truncate(2)
			write(t, f, "XY")
		}, map[string]string{"/d/a": "abcdef"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMem()
			if err := MkdirAllDurable(m, "/d"); err != nil { // the directory itself is durable
				t.Fatal(err)
			}
			tc.script(t, m)
			c := m.CrashClone()
			for _, name := range c.Files() {
				if _, ok := tc.want[name]; !ok {
					t.Errorf("%s survived the crash", name)
				}
			}
			for name, want := range tc.want {
				got, ok := content(t, c, name)
				if !ok || got != want {
					t.Errorf("%s = %q (exists %v), want %q", name, got, ok, want)
				}
			}
		})
	}
}

func TestMemTornTailIsAPrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := NewMem()
	if err := MkdirAllDurable(m, "/d"); err != nil {
		t.Fatal(err)
	}
	f, _ := m.Create("/d/a")
	write(t, f, "synced:")
	f.Sync()
	m.SyncDir("/d")
	write(t, f, "0123456789")
	seen := map[int]bool{}
	for range 200 {
		got, _ := content(t, m.CrashCloneTorn(rng), "/d/a")
		if !bytes.HasPrefix([]byte("synced:0123456789"), []byte(got)) || len(got) < len("synced:") {
			t.Fatalf("torn content %q", got)
		}
		seen[len(got)] = true
	}
	if len(seen) < 5 {
		t.Fatalf("torn lengths not random: %v", seen)
	}
}

func TestMemFileSemantics(t *testing.T) {
	m := NewMem()
	if _, err := m.Create("/missing/a"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("create in missing dir: %v", err)
	}
	m.MkdirAll("/d/e", 0o755)
	f, _ := m.OpenFile("/d/e/a", os.O_RDWR|os.O_CREATE, 0o644)
	write(t, f, "hello")
	write(t, f, " world")
	if _, err := m.OpenFile("/d/e/a", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, os.ErrExist) {
		t.Fatalf("O_EXCL: %v", err)
	}
	b := make([]byte, 5)
	if n, err := f.ReadAt(b, 6); n != 5 || err != nil || string(b) != "world" {
		t.Fatalf("ReadAt: %d %v %q", n, err, b)
	}
	if n, err := f.ReadAt(b, 9); n != 2 || !errors.Is(err, io.EOF) {
		t.Fatalf("short ReadAt: %d %v", n, err)
	}
	r, _ := m.Open("/d/e/a")
	if _, err := r.Write([]byte("x")); !errors.Is(err, os.ErrPermission) {
		t.Fatalf("write to read-only: %v", err)
	}
	names, _ := m.ReadDir("/d")
	if len(names) != 1 || names[0] != "e" {
		t.Fatalf("ReadDir: %v", names)
	}
	if err := m.Remove("/d/e"); err == nil {
		t.Fatal("removed a non-empty directory")
	}
	f.Close()
	if err := f.Close(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("double close: %v", err)
	}
}

func TestFaulty(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	isA := func(p string) bool { return p == "/d/a" }
	fs := NewFaulty(m, FailNth(OpWrite, 2, isA, false))
	a, _ := fs.Create("/d/a")
	b, _ := fs.Create("/d/b")
	steps := []struct {
		f    File
		fail bool
	}{{a, false}, {b, false}, {a, true}, {b, false}, {a, false}}
	for i, s := range steps {
		_, err := s.f.Write([]byte("x"))
		if (err != nil) != s.fail || (err != nil && !errors.Is(err, ErrInjected)) {
			t.Fatalf("step %d: err %v, want fail %v", i, err, s.fail)
		}
	}
	if got, _ := content(t, m, "/d/a"); got != "xx" {
		t.Fatalf("failed write reached the file: %q", got)
	}
	sticky := NewFaulty(m, FailNth(OpSync, 1, nil, true))
	c, _ := sticky.Create("/d/c")
	for range 3 {
		if err := c.Sync(); !errors.Is(err, ErrInjected) {
			t.Fatalf("sticky sync: %v", err)
		}
	}
	if err := sticky.SyncDir("/d"); err != nil {
		t.Fatalf("other op failed: %v", err)
	}
}

func TestOSRoundTrip(t *testing.T) {
	dir := t.TempDir()
	fs := OS
	if err := fs.MkdirAll(dir+"/x", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create(dir + "/x/a")
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, "abc")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.Size(); n != 3 {
		t.Fatalf("size %d", n)
	}
	f.Close()
	if err := fs.Rename(dir+"/x/a", dir+"/x/b"); err != nil {
		t.Fatal(err)
	}
	if err := fs.SyncDir(dir + "/x"); err != nil {
		t.Fatal(err)
	}
	names, _ := fs.ReadDir(dir + "/x")
	if len(names) != 1 || names[0] != "b" {
		t.Fatalf("ReadDir %v", names)
	}
	if got, _ := content(t, fs, dir+"/x/b"); got != "abc" {
		t.Fatalf("content %q", got)
	}
}
