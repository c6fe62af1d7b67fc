package vfs

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestLockIsExclusiveUntilReleased(t *testing.T) {
	for name, fs := range map[string]FS{"os": OS, "mem": NewMem(), "faulty": NewFaulty(NewMem(), func(Op, string) error { return nil })} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := MkdirAllDurable(fs, dir); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, ".lock")
			first, err := Lock(fs, path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Lock(fs, path); !errors.Is(err, ErrLocked) {
				t.Fatalf("second lock while held: %v, want ErrLocked", err)
			}
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			again, err := Lock(fs, path)
			if err != nil {
				t.Fatalf("lock after release: %v", err)
			}
			if err := again.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestMemCrashCloneHoldsNoLocks(t *testing.T) {
	m := NewMem()
	if _, err := Lock(m, "/x.lock"); err != nil {
		t.Fatal(err)
	}
	l, err := Lock(m.CrashClone(), "/x.lock")
	if err != nil {
		t.Fatalf("a crash clone (a restarted machine) still held the lock: %v", err)
	}
	_ = l.Close()
}
