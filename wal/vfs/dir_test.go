package vfs

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func exists(fs FS, p string) bool {
	_, err := fs.Stat(p)
	return err == nil
}

// TestMemDirectoryDurability: a directory's name is durable only once its
// parent is synced after its creation (or removal), and a crash drops a
// non-durable directory with everything under it.
func TestMemDirectoryDurability(t *testing.T) {
	cases := []struct {
		name    string
		script  func(t *testing.T, m *Mem)
		present []string
		absent  []string
	}{
		{"unsynced mkdir is lost with its synced contents", func(t *testing.T, m *Mem) {
			m.MkdirAll("/a/b", 0o755)
			f, _ := m.Create("/a/b/f")
			write(t, f, "x")
			f.Sync()
			m.SyncDir("/a/b")
		}, nil, []string{"/a", "/a/b", "/a/b/f"}},
		{"only the deepest parent synced", func(t *testing.T, m *Mem) {
			m.MkdirAll("/a/b", 0o755)
			m.SyncDir("/a")
			f, _ := m.Create("/a/b/f")
			f.Sync()
			m.SyncDir("/a/b")
		}, nil, []string{"/a", "/a/b/f"}},
		{"every parent synced", func(t *testing.T, m *Mem) {
			m.MkdirAll("/a/b", 0o755)
			m.SyncDir("/")
			m.SyncDir("/a")
			f, _ := m.Create("/a/b/f")
			write(t, f, "x")
			f.Sync()
			m.SyncDir("/a/b")
		}, []string{"/a", "/a/b", "/a/b/f"}, nil},
		{"relative paths hang off .", func(t *testing.T, m *Mem) {
			m.MkdirAll("r/s", 0o755)
			m.SyncDir(".")
			m.SyncDir("r")
		}, []string{"r", "r/s"}, nil},
		{"unsynced rmdir is undone", func(t *testing.T, m *Mem) {
			m.MkdirAll("/a/b", 0o755)
			m.SyncDir("/")
			m.SyncDir("/a")
			m.Remove("/a/b")
		}, []string{"/a/b"}, nil},
		{"synced rmdir", func(t *testing.T, m *Mem) {
			m.MkdirAll("/a/b", 0o755)
			m.SyncDir("/")
			m.SyncDir("/a")
			m.Remove("/a/b")
			m.SyncDir("/a")
		}, []string{"/a"}, []string{"/a/b"}},
		{"renamed directory keeps its durable contents", func(t *testing.T, m *Mem) {
			MkdirAllDurable(m, "/a/b")
			MkdirAllDurable(m, "/t")
			f, _ := m.Create("/a/b/f")
			write(t, f, "x")
			f.Sync()
			m.SyncDir("/a/b")
			m.Rename("/a/b", "/t/b")
			m.SyncDir("/a")
			m.SyncDir("/t")
		}, []string{"/t/b/f"}, []string{"/a/b"}},
		{"unsynced directory rename is undone", func(t *testing.T, m *Mem) {
			MkdirAllDurable(m, "/a/b")
			MkdirAllDurable(m, "/t")
			f, _ := m.Create("/a/b/f")
			f.Sync()
			m.SyncDir("/a/b")
			m.Rename("/a/b", "/t/b")
		}, []string{"/a/b/f"}, []string{"/t/b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMem()
			tc.script(t, m)
			c := m.CrashClone()
			for _, p := range tc.present {
				if !exists(c, p) {
					t.Errorf("%s lost in the crash", p)
				}
			}
			for _, p := range tc.absent {
				if exists(c, p) {
					t.Errorf("%s survived the crash", p)
				}
			}
		})
	}
}

func TestMemRenameDirectory(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/a/b/c", 0o755)
	f, _ := m.Create("/a/b/c/f")
	write(t, f, "x")
	m.MkdirAll("/t", 0o755)
	for _, bad := range []string{"/a/b/c/d", "/t", "/missing/x"} {
		if err := m.Rename("/a/b", bad); err == nil {
			t.Fatalf("rename /a/b to %s succeeded", bad)
		}
	}
	if err := m.Rename("/a/b", "/t/b"); err != nil {
		t.Fatal(err)
	}
	if got, _ := content(t, m, "/t/b/c/f"); got != "x" || exists(m, "/a/b") {
		t.Fatalf("after rename: %q, old exists %v", got, exists(m, "/a/b"))
	}
	if err := m.Remove("/"); err == nil {
		t.Fatal("removed the root")
	}
}

// syncLog is an inject function recording the directories synced.
type syncLog struct {
	mu     sync.Mutex
	synced []string
}

func (s *syncLog) inject(op Op, path string) error {
	if op == OpSyncDir {
		s.mu.Lock()
		s.synced = append(s.synced, filepath.Clean(path))
		s.mu.Unlock()
	}
	return nil
}

func TestMkdirAllDurable(t *testing.T) {
	cases := []struct {
		name, existing, dir string
		synced              []string
	}{
		{"all missing", "", "/a/b/c", []string{"/", "/a", "/a/b"}},
		{"some exist", "/a", "/a/b/c", []string{"/a", "/a/b"}},
		{"all exist", "/a/b/c", "/a/b/c", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMem()
			if tc.existing != "" {
				m.MkdirAll(tc.existing, 0o755)
			}
			var log syncLog
			if err := MkdirAllDurable(NewFaulty(m, log.inject), tc.dir); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(log.synced, tc.synced) {
				t.Fatalf("synced %v, want %v", log.synced, tc.synced)
			}
			if tc.existing == "" && !exists(m.CrashClone(), tc.dir) {
				t.Fatal("directory lost in a crash")
			}
		})
	}
	m := NewMem()
	m.MkdirAll("/a", 0o755)
	m.Create("/a/f")
	if err := MkdirAllDurable(m, "/a/f/g"); err == nil {
		t.Fatal("mkdir under a file succeeded")
	}
	fail := NewFaulty(NewMem(), FailNth(OpSyncDir, 2, nil, false))
	if err := MkdirAllDurable(fail, "/x/y"); !errors.Is(err, ErrInjected) {
		t.Fatalf("failed parent fsync: %v", err)
	}
}

// TestWriteFileDurableMakesItsDirectoriesDurable: before MkdirAllDurable,
// WriteFileDurable created /s/t/u with MkdirAll and synced only /s/t/u, so
// a crash lost the file with its unsynced parents.
func TestWriteFileDurableMakesItsDirectoriesDurable(t *testing.T) {
	m := NewMem()
	if err := WriteFileDurable(m, "/s/t/u/f", []byte("data")); err != nil {
		t.Fatal(err)
	}
	if got, ok := content(t, m.CrashClone(), "/s/t/u/f"); !ok || got != "data" {
		t.Fatalf("after crash: %q (exists %v)", got, ok)
	}
}

func makeTree(t *testing.T, fs FS, root string) {
	t.Helper()
	if err := MkdirAllDurable(fs, filepath.Join(root, "x", "y")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"f", "x/g", "x/y/h"} {
		if err := WriteFileDurable(fs, filepath.Join(root, p), []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRemoveAllDurable(t *testing.T) {
	for _, fsName := range []string{"mem", "os"} {
		t.Run(fsName, func(t *testing.T) {
			var fs FS = NewMem()
			base := "/data"
			if fsName == "os" {
				fs, base = OS, t.TempDir()
			}
			root, trash := filepath.Join(base, "topic", "0"), filepath.Join(base, ".trash")
			makeTree(t, fs, root)
			if err := RemoveAllDurable(fs, root, trash); err != nil {
				t.Fatal(err)
			}
			if exists(fs, root) {
				t.Fatal("still there")
			}
			if names, _ := fs.ReadDir(trash); len(names) != 0 {
				t.Fatalf("trash not emptied: %v", names)
			}
			if err := RemoveAllDurable(fs, root, trash); err != nil {
				t.Fatalf("removing a missing path: %v", err)
			}
			if mem, ok := fs.(*Mem); ok {
				if files := mem.CrashClone().Files(); len(files) != 0 {
					t.Fatalf("crash resurrected %v", files)
				}
			}
			if err := RemoveAllDurable(fs, base, filepath.Join(base, "t")); err == nil {
				t.Fatal("trash inside the removed tree accepted")
			}
		})
	}
}

// TestRemoveAllDurableCrash crashes at every step of a removal: the tree is
// either whole at its path or gone from it, never partly removed there, and
// EmptyTrash clears whatever the crash left in the trash.
func TestRemoveAllDurableCrash(t *testing.T) {
	for step := int64(1); step <= 16; step++ {
		m := NewMem()
		root, trash := "/data/topic/0", "/data/.trash"
		makeTree(t, m, root)
		var crashed *Mem
		var calls int64
		fs := NewFaulty(m, func(op Op, path string) error {
			if op == OpRemove || op == OpRename || op == OpSyncDir {
				calls++
				if calls == step {
					crashed = m.CrashClone()
					return ErrInjected
				}
			}
			return nil
		})
		err := RemoveAllDurable(fs, root, trash)
		if crashed == nil {
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			break
		}
		var files []string
		for _, f := range crashed.Files() {
			if strings.HasPrefix(f, root+"/") {
				files = append(files, f)
			}
		}
		if len(files) != 0 && len(files) != 3 {
			t.Fatalf("crash at step %d left %s half removed: %v", step, root, files)
		}
		if err := EmptyTrash(crashed, trash); err != nil {
			t.Fatalf("step %d: empty trash: %v", step, err)
		}
		if names, _ := crashed.ReadDir(trash); len(names) != 0 {
			t.Fatalf("step %d: trash left %v", step, names)
		}
	}
}

func TestEmptyTrashMissing(t *testing.T) {
	if err := EmptyTrash(NewMem(), "/nope"); err != nil {
		t.Fatal(err)
	}
	if err := EmptyTrash(NewFaulty(NewMem(), FailNth(OpReadDir, 1, nil, false)), "/"); !errors.Is(err, ErrInjected) {
		t.Fatalf("readdir failure: %v", err)
	}
}
