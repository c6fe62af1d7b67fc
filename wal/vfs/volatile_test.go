package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// volWorld is a Volatile over a disk that outlives it. crash kills the
// Volatile (every later operation of it fails, as a killed process does
// nothing more) and starts a new one over the same disk.
type volWorld struct {
	disk FS     // what survives: SIGKILL keeps the inner FS whole
	dir  string // where the test's files go
	dead *atomic.Bool
	v    *Volatile
}

func newVolWorld(t *testing.T, disk FS, dir string) *volWorld {
	t.Helper()
	if err := disk.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w := &volWorld{disk: disk, dir: dir}
	w.start()
	return w
}

func (w *volWorld) start() {
	dead := new(atomic.Bool)
	w.dead = dead
	w.v = NewVolatile(NewFaulty(w.disk, func(Op, string) error {
		if dead.Load() {
			return ErrInjected
		}
		return nil
	}))
}

func (w *volWorld) crash() {
	w.dead.Store(true)
	w.start()
}

func (w *volWorld) path(name string) string { return filepath.Join(w.dir, name) }

// volDisks runs test on a Volatile over the real disk and over a Mem.
func volDisks(t *testing.T, test func(t *testing.T, w *volWorld)) {
	t.Run("os", func(t *testing.T) { test(t, newVolWorld(t, OS, t.TempDir())) })
	t.Run("mem", func(t *testing.T) { test(t, newVolWorld(t, NewMem(), "/d")) })
}

func mustOpenFile(t *testing.T, fs FS, name string, flag int) File {
	t.Helper()
	f, err := fs.OpenFile(name, flag, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustWriteAt(t *testing.T, f File, s string, off int64) {
	t.Helper()
	if _, err := f.WriteAt([]byte(s), off); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantContent checks the logical contents of name through f and fs: ReadAt,
// Size and Stat.
func wantContent(t *testing.T, fs FS, f File, name, want string) {
	t.Helper()
	if n, err := f.Size(); err != nil || n != int64(len(want)) {
		t.Fatalf("%s: Size %d, %v; want %d", name, n, err, len(want))
	}
	if st, err := fs.Stat(name); err != nil || st.Size() != int64(len(want)) {
		t.Fatalf("%s: Stat %v, %v; want size %d", name, st, err, len(want))
	}
	b := make([]byte, len(want)+10)
	n, err := f.ReadAt(b, 0)
	if string(b[:n]) != want || !errors.Is(err, io.EOF) {
		t.Fatalf("%s: ReadAt %q, %v; want %q, EOF", name, b[:n], err, want)
	}
}

func TestVolatileReadYourWrites(t *testing.T) {
	volDisks(t, func(t *testing.T, w *volWorld) {
		name := w.path("f")
		app, err := w.v.Create(name)
		must(t, err)
		rw := mustOpenFile(t, w.v, name, os.O_RDWR)
		ro, err := w.v.Open(name)
		must(t, err)
		write(t, app, "hello")
		for _, f := range []File{app, rw, ro} {
			wantContent(t, w.v, f, name, "hello")
		}
		mustWriteAt(t, rw, "J", 0)
		write(t, rw, "ab") // at rw's own position, which is 0
		write(t, app, "!") // at the end
		wantContent(t, w.v, ro, name, "abllo!")
		if _, err := app.WriteAt([]byte("x"), 0); err == nil {
			t.Fatal("WriteAt on an O_APPEND file succeeded")
		}
		if _, err := ro.Write([]byte("x")); err == nil {
			t.Fatal("Write on a read-only file succeeded")
		}
		if n, err := ro.ReadAt(make([]byte, 4), 6); n != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("read at the end: %d, %v; want 0, EOF", n, err)
		}
		// A write beyond the end leaves a gap of zeros, past a page.
		mustWriteAt(t, rw, "z", 5000)
		want := "abllo!" + string(make([]byte, 5000-6)) + "z"
		wantContent(t, w.v, ro, name, want)
		// Nothing reached the disk yet.
		if got, _ := content(t, w.disk, name); got != "" {
			t.Fatalf("the disk holds %q before any Sync", got)
		}
		if n := w.v.UnsyncedBytes(); n != 2*volPage {
			t.Fatalf("%d bytes held, want two pages", n)
		}
		must(t, StartWriteback(app, 0, 5001)) // not forwarded: nothing is in the inner file
		must(t, ro.Sync())                    // any handle's Sync writes the file out
		if got, _ := content(t, w.disk, name); got != want {
			t.Fatalf("the disk holds %d bytes after Sync, want %d", len(got), len(want))
		}
		if n := w.v.UnsyncedBytes(); n != 0 {
			t.Fatalf("%d bytes held after Sync", n)
		}
		for _, f := range []File{app, rw, ro} {
			must(t, f.Close())
		}
		if _, err := ro.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("read after close: %v", err)
		}
	})
}

func TestVolatileCrashKeepsOnlySynced(t *testing.T) {
	preallocated := string(make([]byte, 3*volPage))
	cases := []struct {
		name   string
		script func(t *testing.T, w *volWorld)
		want   map[string]string // name -> content after the crash; "-" means absent
	}{
		{"appends", func(t *testing.T, w *volWorld) {
			f, _ := w.v.Create(w.path("a"))
			write(t, f, "abc")
			must(t, f.Sync())
			write(t, f, "def")
		}, map[string]string{"a": "abc"}},
		{"overwrites of a preallocated file", func(t *testing.T, w *volWorld) {
			f := mustOpenFile(t, w.v, w.path("j.tmp"), os.O_RDWR|os.O_CREATE|os.O_TRUNC)
			mustWriteAt(t, f, preallocated, 0)
			must(t, DataSync(f))
			must(t, f.Close())
			must(t, w.v.Rename(w.path("j.tmp"), w.path("j")))
			f = mustOpenFile(t, w.v, w.path("j"), os.O_RDWR)
			mustWriteAt(t, f, "rec1", 0)
			mustWriteAt(t, f, "rec2", volPage-2) // across a page boundary
			must(t, DataSync(f))
			mustWriteAt(t, f, "rec3", volPage+2)
			mustWriteAt(t, f, "lost", 0)
		}, map[string]string{"j": "rec1" + preallocated[4:volPage-2] + "rec2" + preallocated[volPage+2:], "j.tmp": "-"}},
		{"written, renamed, not synced", func(t *testing.T, w *volWorld) {
			f, _ := w.v.Create(w.path("a.tmp"))
			write(t, f, "new")
			must(t, w.v.Rename(w.path("a.tmp"), w.path("a")))
		}, map[string]string{"a": "", "a.tmp": "-"}},
		{"renamed, then synced through the old handle", func(t *testing.T, w *volWorld) {
			f, _ := w.v.Create(w.path("a.tmp"))
			write(t, f, "new")
			must(t, w.v.Rename(w.path("a.tmp"), w.path("a")))
			must(t, f.Sync())
		}, map[string]string{"a": "new"}},
		{"a rename replaces a held file", func(t *testing.T, w *volWorld) {
			old, _ := w.v.Create(w.path("a"))
			write(t, old, "old")
			f, _ := w.v.Create(w.path("b"))
			write(t, f, "new")
			must(t, f.Sync())
			must(t, w.v.Rename(w.path("b"), w.path("a")))
			must(t, old.Sync()) // writes to the replaced file only
		}, map[string]string{"a": "new", "b": "-"}},
		{"a renamed directory takes its files", func(t *testing.T, w *volWorld) {
			must(t, w.v.MkdirAll(w.path("d"), 0o755))
			f, _ := w.v.Create(w.path("d/a"))
			write(t, f, "abc")
			must(t, f.Close())
			must(t, w.v.Rename(w.path("d"), w.path("e")))
			g := mustOpenFile(t, w.v, w.path("e/a"), os.O_RDWR|os.O_APPEND)
			wantContent(t, w.v, g, w.path("e/a"), "abc")
			write(t, g, "def")
			must(t, g.Sync())
		}, map[string]string{"e/a": "abcdef"}},
		{"truncation is not held back", func(t *testing.T, w *volWorld) {
			f, _ := w.v.Create(w.path("a"))
			write(t, f, "abcdef")
			must(t, f.Sync())
			must(t, f.Truncate(2))
			write(t, f, "zz")
		}, map[string]string{"a": "ab"}},
		{"an extending truncation keeps zeros", func(t *testing.T, w *volWorld) {
			f, _ := w.v.Create(w.path("a"))
			write(t, f, "ab")
			must(t, f.Truncate(5))
		}, map[string]string{"a": "\x00\x00\x00\x00\x00"}},
		{"O_TRUNC is not held back", func(t *testing.T, w *volWorld) {
			f, _ := w.v.Create(w.path("a"))
			write(t, f, "abc")
			must(t, f.Sync())
			g, _ := w.v.Create(w.path("a"))
			write(t, g, "x")
			wantContent(t, w.v, f, w.path("a"), "x")
		}, map[string]string{"a": ""}},
		{"closed unsynced file", func(t *testing.T, w *volWorld) {
			f, _ := w.v.Create(w.path("a"))
			write(t, f, "abc")
			must(t, f.Close())
			g, _ := w.v.Open(w.path("a"))
			wantContent(t, w.v, g, w.path("a"), "abc")
		}, map[string]string{"a": ""}},
		{"synced by another handle after the writer closed", func(t *testing.T, w *volWorld) {
			f, _ := w.v.Create(w.path("a"))
			g, _ := w.v.Open(w.path("a"))
			write(t, f, "abc")
			must(t, f.Close())
			must(t, g.Sync())
		}, map[string]string{"a": "abc"}},
		{"removed", func(t *testing.T, w *volWorld) {
			f, _ := w.v.Create(w.path("a"))
			write(t, f, "abc")
			must(t, f.Sync())
			write(t, f, "def")
			must(t, w.v.Remove(w.path("a")))
			wantLen(t, f, 6) // the handle still works
			must(t, f.Sync())
		}, map[string]string{"a": "-"}},
		{"O_EXCL passes through", func(t *testing.T, w *volWorld) {
			f, _ := w.v.Create(w.path("a"))
			write(t, f, "abc")
			if _, err := w.v.OpenFile(w.path("a"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, os.ErrExist) {
				t.Fatalf("O_EXCL open of an existing file: %v", err)
			}
		}, map[string]string{"a": ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			volDisks(t, func(t *testing.T, w *volWorld) {
				c.script(t, w)
				w.crash()
				for name, want := range c.want {
					got, ok := content(t, w.v, w.path(name))
					if want == "-" && ok || want != "-" && got != want {
						t.Errorf("%s after the crash: %q (exists %v), want %q", name, got, ok, want)
					}
				}
			})
		})
	}
}

func wantLen(t *testing.T, f File, n int64) {
	t.Helper()
	if got, err := f.Size(); err != nil || got != n {
		t.Fatalf("size %d, %v; want %d", got, err, n)
	}
}

func TestVolatileFlush(t *testing.T) {
	volDisks(t, func(t *testing.T, w *volWorld) {
		want := map[string]string{}
		for i := range 5 {
			name := w.path(fmt.Sprint("f", i))
			f, _ := w.v.Create(name)
			want[name] = string(bytes.Repeat([]byte{byte('a' + i)}, 3000*i))
			write(t, f, want[name])
			if i%2 == 0 {
				must(t, f.Close())
			}
		}
		if w.v.UnsyncedBytes() == 0 {
			t.Fatal("nothing held before Flush")
		}
		must(t, w.v.Flush())
		if n := w.v.UnsyncedBytes(); n != 0 {
			t.Fatalf("%d bytes held after Flush", n)
		}
		w.crash()
		for name, s := range want {
			if got, _ := content(t, w.v, name); got != s {
				t.Errorf("%s: %d bytes after Flush and a crash, want %d", name, len(got), len(s))
			}
		}
	})
}

func TestVolatileLockForwards(t *testing.T) {
	v := NewVolatile(OS)
	path := filepath.Join(t.TempDir(), "lock")
	l, err := Lock(v, path)
	must(t, err)
	if _, err := Lock(NewVolatile(OS), path); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v, want ErrLocked", err)
	}
	must(t, l.Close())
}

// volModel is what a file should hold: its logical contents, and what a
// crash leaves.
type volModel struct {
	logical, synced []byte
}

// resize cuts b to n bytes or extends it with zeros.
func resize(b []byte, n int) []byte {
	if n <= len(b) {
		return b[:n]
	}
	return append(b, make([]byte, n-len(b))...)
}

func (m *volModel) writeAt(p []byte, off int) {
	m.logical = resize(m.logical, max(len(m.logical), off+len(p)))
	copy(m.logical[off:], p)
}

// volScenario drives one file through random writes, syncs, truncations,
// reopenings, renames and crashes, and checks it against the model after
// every step: the logical contents through every handle, and the synced
// contents on the disk itself.
func volScenario(t *testing.T, w *volWorld, rng *rand.Rand) {
	name := w.path("f")
	var m volModel
	var app, rw, ro File
	var rwPos int
	open := func() {
		app = mustOpenFile(t, w.v, name, os.O_RDWR|os.O_CREATE|os.O_APPEND)
		rw = mustOpenFile(t, w.v, name, os.O_RDWR)
		ro = mustOpenFile(t, w.v, name, os.O_RDONLY)
		rwPos = 0
	}
	open()
	data := func() []byte {
		p := make([]byte, rng.IntN(3*volPage))
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		return p
	}
	for step := range 200 {
		var op string
		switch p := rng.IntN(100); {
		case p < 25:
			op = "append"
			b := data()
			_, err := app.Write(b)
			must(t, err)
			m.logical = append(m.logical, b...)
		case p < 35:
			op = "write"
			b := data()
			_, err := rw.Write(b)
			must(t, err)
			m.writeAt(b, rwPos)
			rwPos += len(b)
		case p < 55:
			op = "writeat"
			b, off := data(), rng.IntN(len(m.logical)+2*volPage)
			mustWriteAt(t, rw, string(b), int64(off))
			m.writeAt(b, off)
		case p < 65:
			op = "sync"
			f := []File{app, rw, ro}[rng.IntN(3)]
			if rng.IntN(2) == 0 {
				must(t, DataSync(f))
			} else {
				must(t, f.Sync())
			}
			m.synced = slices.Clone(m.logical)
		case p < 70:
			op = "flush"
			must(t, w.v.Flush())
			m.synced = slices.Clone(m.logical)
		case p < 77:
			op = "truncate"
			n := rng.IntN(len(m.logical) + volPage)
			must(t, rw.Truncate(int64(n)))
			m.logical = resize(m.logical, n)
			m.synced = resize(m.synced, n)
		case p < 83:
			op = "reopen"
			for _, f := range []File{app, rw, ro} {
				must(t, f.Close())
			}
			open()
		case p < 88:
			op = "rename"
			to := w.path(fmt.Sprint("f", step))
			must(t, w.v.Rename(name, to))
			name = to
		default:
			op = "crash"
			w.crash()
			m.logical = slices.Clone(m.synced)
			open()
		}
		where := fmt.Sprintf("step %d (%s)", step, op)
		for _, f := range []File{app, rw, ro} {
			wantLen(t, f, int64(len(m.logical)))
		}
		if st, err := w.v.Stat(name); err != nil || st.Size() != int64(len(m.logical)) {
			t.Fatalf("%s: stat %v, %v; want size %d", where, st, err, len(m.logical))
		}
		got := make([]byte, len(m.logical))
		if _, err := ro.ReadAt(got, 0); err != nil && len(got) > 0 || !bytes.Equal(got, m.logical) {
			t.Fatalf("%s: the file reads differently from the model (%v)", where, err)
		}
		if len(m.logical) > 0 {
			off := rng.IntN(len(m.logical))
			part := make([]byte, rng.IntN(2*volPage))
			n, err := rw.ReadAt(part, int64(off))
			if want := m.logical[off:min(len(m.logical), off+len(part))]; !bytes.Equal(part[:n], want) || n < len(part) && !errors.Is(err, io.EOF) {
				t.Fatalf("%s: ReadAt(%d bytes, %d): %d, %v", where, len(part), off, n, err)
			}
		}
		if disk, _ := content(t, w.disk, name); disk != string(m.synced) {
			t.Fatalf("%s: the disk holds %d bytes, want the %d synced", where, len(disk), len(m.synced))
		}
		held := w.v.UnsyncedBytes()
		if held == 0 && !bytes.Equal(m.logical, m.synced) || held != 0 && (op == "sync" || op == "flush" || op == "crash") {
			t.Fatalf("%s: %d bytes held; logical and synced contents equal: %v", where, held, bytes.Equal(m.logical, m.synced))
		}
	}
}

func TestVolatileModel(t *testing.T) {
	seeds := 30
	if testing.Short() {
		seeds = 8
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("reproduce with: go test ./wal/vfs -run 'TestVolatileModel/seed=%d$'", seed)
				}
			}()
			volDisks(t, func(t *testing.T, w *volWorld) {
				volScenario(t, w, rand.New(rand.NewPCG(seed, 0x7017)))
			})
		})
	}
}

// TestVolatileConcurrentReads reads a file from several goroutines while one
// goroutine appends and syncs it and another flushes: every read sees a
// prefix of what was written.
func TestVolatileConcurrentReads(t *testing.T) {
	volDisks(t, func(t *testing.T, w *volWorld) {
		name := w.path("f")
		f, err := w.v.Create(name)
		must(t, err)
		byteAt := func(i int64) byte { return byte(i*7 + i/251) }
		const total = 24 * volPage
		var written atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := w.v.Open(name)
				if err != nil {
					errs <- err
					return
				}
				defer r.Close()
				buf := make([]byte, 3*volPage)
				for done := false; !done; {
					done = written.Load() == total
					low := written.Load() // bytes certainly written before this read
					off := max(0, low-int64(len(buf))/2)
					n, err := r.ReadAt(buf, off)
					if err != nil && !errors.Is(err, io.EOF) {
						errs <- err
						return
					}
					if off+int64(n) < min(low, off+int64(len(buf))) {
						errs <- fmt.Errorf("read %d bytes at %d, but %d were written", n, off, low)
						return
					}
					for i := range int64(n) {
						if buf[i] != byteAt(off+i) {
							errs <- fmt.Errorf("byte %d reads %d, want %d", off+i, buf[i], byteAt(off+i))
							return
						}
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for written.Load() < total {
				if err := w.v.Flush(); err != nil {
					errs <- err
					return
				}
			}
		}()
		rng := rand.New(rand.NewPCG(1, 2))
		for off := int64(0); off < total; {
			p := make([]byte, min(total-off, 1+rng.Int64N(volPage)))
			for i := range p {
				p[i] = byteAt(off + int64(i))
			}
			write(t, f, string(p))
			off += int64(len(p))
			written.Store(off)
			if rng.IntN(4) == 0 {
				must(t, f.Sync())
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		must(t, f.Sync())
		if disk, _ := content(t, w.disk, name); int64(len(disk)) != total {
			t.Fatalf("the disk holds %d bytes, want %d", len(disk), total)
		}
	})
}

// TestVolatileWritesDuringSync holds a Sync in the inner fsync and checks
// that the file is read and written meanwhile, and that what was written
// during the Sync stays held after it.
func TestVolatileWritesDuringSync(t *testing.T) {
	disk := NewMem()
	must(t, disk.MkdirAll("/d", 0o755))
	var block atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	v := NewVolatile(NewFaulty(disk, func(op Op, _ string) error {
		if op == OpSync && block.CompareAndSwap(true, false) {
			entered <- struct{}{}
			<-release
		}
		return nil
	}))
	f, err := v.Create("/d/a")
	must(t, err)
	write(t, f, "abc")
	block.Store(true)
	synced := make(chan error, 1)
	go func() { synced <- f.Sync() }()
	letGo := sync.OnceFunc(func() { close(release) })
	t.Cleanup(letGo)
	recvWithin(t, entered, "the Sync inside the inner fsync")
	g := mustOpenFile(t, v, "/d/a", os.O_RDWR)
	wantContent(t, v, g, "/d/a", "abc")
	write(t, f, "def")
	mustWriteAt(t, g, "X", 1) // into the page being written out
	wantContent(t, v, g, "/d/a", "aXcdef")
	letGo()
	must(t, recvWithin(t, synced, "the held Sync"))
	if got, _ := content(t, disk, "/d/a"); got != "abc" {
		t.Fatalf("the disk holds %q after the Sync, want what it wrote out", got)
	}
	if n := v.UnsyncedBytes(); n != volPage {
		t.Fatalf("%d bytes held after the Sync, want the page written during it", n)
	}
	wantContent(t, v, f, "/d/a", "aXcdef")
	must(t, g.Sync())
	if got, _ := content(t, disk, "/d/a"); got != "aXcdef" {
		t.Fatalf("the disk holds %q after the second Sync", got)
	}
}

// TestVolatileFailedSyncKeepsPages fails the inner write or fsync of a Sync
// and checks that the bytes stay held and a later Sync writes them out.
func TestVolatileFailedSyncKeepsPages(t *testing.T) {
	for _, op := range []Op{OpWrite, OpSync} {
		t.Run(op.String(), func(t *testing.T) {
			disk := NewMem()
			must(t, disk.MkdirAll("/d", 0o755))
			var fail atomic.Bool
			v := NewVolatile(NewFaulty(disk, func(o Op, _ string) error {
				if o == op && fail.Load() {
					return ErrInjected
				}
				return nil
			}))
			f, err := v.Create("/d/a")
			must(t, err)
			write(t, f, "abc")
			fail.Store(true)
			if err := f.Sync(); !errors.Is(err, ErrInjected) {
				t.Fatalf("Sync: %v, want the injected failure", err)
			}
			if n := v.UnsyncedBytes(); n != volPage {
				t.Fatalf("%d bytes held after a failed Sync, want one page", n)
			}
			fail.Store(false)
			write(t, f, "d")
			wantContent(t, v, f, "/d/a", "abcd")
			must(t, f.Sync())
			if got, _ := content(t, disk, "/d/a"); got != "abcd" || v.UnsyncedBytes() != 0 {
				t.Fatalf("the disk holds %q and %d bytes are held after a good Sync", got, v.UnsyncedBytes())
			}
		})
	}
}
