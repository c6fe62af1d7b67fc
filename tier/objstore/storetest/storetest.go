package storetest

// storetest.go owns the conformance suite. Each subtest gets a fresh store
// from newStore, so implementations that share a server (s3) give each a
// fresh prefix.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/tier/objstore"
)

// Run runs the conformance suite against the stores newStore returns; each
// subtest calls it once and expects an empty store.
func Run(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s objstore.Store)
	}{
		{"PutGet", testPutGet},
		{"RangedGet", testRangedGet},
		{"Head", testHead},
		{"NotFound", testNotFound},
		{"List", testList},
		{"ListStop", testListStop},
		{"Delete", testDelete},
		{"Overwrite", testOverwrite},
		{"OverwriteAtomic", testOverwriteAtomic},
		{"BuffersNotShared", testBuffersNotShared},
		{"LargeObject", testLargeObject},
		{"InvalidKey", testInvalidKey},
		{"ConcurrentPutDelete", testConcurrentPutDelete},
		{"ContextCancelled", testContextCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

// ctx returns a context for one test's calls.
func ctx(t *testing.T) context.Context { return t.Context() }

func mustPut(t *testing.T, s objstore.Store, key string, body []byte) {
	t.Helper()
	if err := s.Put(ctx(t), key, body); err != nil {
		t.Fatalf("Put(%q, %d bytes): %v", key, len(body), err)
	}
}

func mustGet(t *testing.T, s objstore.Store, key string, off, n int64) []byte {
	t.Helper()
	b, err := s.Get(ctx(t), key, off, n)
	if err != nil {
		t.Fatalf("Get(%q, %d, %d): %v", key, off, n, err)
	}
	return b
}

// keys lists prefix and returns the keys in the order List gave them.
func keys(t *testing.T, s objstore.Store, prefix string) []string {
	t.Helper()
	var got []string
	err := s.List(ctx(t), prefix, func(info objstore.Info) error {
		got = append(got, info.Key)
		return nil
	})
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return got
}

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("%s: err = %v, want objstore.ErrNotFound", what, err)
	}
	if objstore.IsRetriable(err) {
		t.Fatalf("%s: IsRetriable(%v) = true for a missing key", what, err)
	}
}

func testPutGet(t *testing.T, s objstore.Store) {
	body := []byte("hello, object storage")
	mustPut(t, s, "a/b/obj", body)
	if got := mustGet(t, s, "a/b/obj", 0, -1); !bytes.Equal(got, body) {
		t.Fatalf("Get = %q, want %q", got, body)
	}
	mustPut(t, s, "empty", nil)
	if got := mustGet(t, s, "empty", 0, -1); len(got) != 0 {
		t.Fatalf("Get(empty) = %q, want no bytes", got)
	}
	if info, err := s.Head(ctx(t), "empty"); err != nil || info.Size != 0 {
		t.Fatalf("Head(empty) = %+v, %v; want size 0", info, err)
	}
}

func testRangedGet(t *testing.T, s objstore.Store) {
	body := make([]byte, 100)
	for i := range body {
		body[i] = byte(i)
	}
	mustPut(t, s, "r", body)
	tests := []struct {
		name    string
		off, n  int64
		want    []byte
		wantErr error
	}{
		{"prefix", 0, 10, body[:10], nil},
		{"middle", 40, 20, body[40:60], nil},
		{"to end", 10, -1, body[10:], nil},
		{"whole", 0, -1, body, nil},
		{"exact end", 90, 10, body[90:], nil},
		{"past end is short", 90, 20, body[90:], nil},
		{"last byte", 99, 1, body[99:], nil},
		{"zero length", 5, 0, []byte{}, nil},
		{"at end", 100, 5, []byte{}, nil},
		{"at end to end", 100, -1, []byte{}, nil},
		{"beyond end", 101, 1, nil, objstore.ErrInvalidRange},
		{"beyond end to end", 150, -1, nil, objstore.ErrInvalidRange},
		{"negative offset", -1, 5, nil, objstore.ErrInvalidRange},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Get(ctx(t), "r", tc.off, tc.n)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || objstore.IsRetriable(err) {
					t.Fatalf("Get(%d, %d) = %d bytes, %v; want final %v", tc.off, tc.n, len(got), err, tc.wantErr)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tc.want) {
				t.Fatalf("Get(%d, %d) = %v, %v; want %v", tc.off, tc.n, got, err, tc.want)
			}
		})
	}
}

func testHead(t *testing.T, s objstore.Store) {
	before := time.Now()
	mustPut(t, s, "h/obj", make([]byte, 1234))
	info, err := s.Head(ctx(t), "h/obj")
	if err != nil {
		t.Fatalf("Head: %v", err)
	}
	if info.Key != "h/obj" || info.Size != 1234 {
		t.Fatalf("Head = %+v, want key h/obj, size 1234", info)
	}
	// Clocks of a remote store may differ a little, and some keep seconds only.
	if d := info.Modified.Sub(before); d < -time.Hour || d > time.Hour {
		t.Fatalf("Head: Modified %v is not near now (%v)", info.Modified, before)
	}
}

func testNotFound(t *testing.T, s objstore.Store) {
	mustPut(t, s, "present/x", []byte("x"))
	for _, key := range []string{"missing", "present/y", "present/x/deeper", "present"} {
		_, err := s.Get(ctx(t), key, 0, -1)
		wantNotFound(t, "Get("+key+")", err)
		_, err = s.Get(ctx(t), key, 0, 0)
		wantNotFound(t, "Get("+key+", 0, 0)", err)
		_, err = s.Head(ctx(t), key)
		wantNotFound(t, "Head("+key+")", err)
	}
}

func testList(t *testing.T, s objstore.Store) {
	// Byte order puts '.' (0x2e) before '/' (0x2f) before '0': a store that
	// walks directories in name order gets p/a.b and p/a/c the wrong way round.
	all := []string{"p/a.b", "p/a/c", "p/a/d/e", "p/a0", "p/ab", "p/b", "p/ü x", "q", "q0/z"}
	shuffled := slices.Clone(all)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) {
		shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
	})
	for i, k := range shuffled {
		mustPut(t, s, k, bytes.Repeat([]byte{'x'}, i+1))
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{"", all},
		{"p/", all[:7]},
		{"p/a", all[:5]},
		{"p/a/", all[1:3]},
		{"p/a/d/e", all[2:3]},
		{"q", all[7:]},
		{"q0/", all[8:]},
		{"zzz", nil},
		{"p/ab/", nil},
	}
	for _, tc := range tests {
		if got := keys(t, s, tc.prefix); !slices.Equal(got, tc.want) {
			t.Errorf("List(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
	sizes := map[string]int64{}
	for i, k := range shuffled {
		sizes[k] = int64(i + 1)
	}
	err := s.List(ctx(t), "", func(info objstore.Info) error {
		if info.Size != sizes[info.Key] || info.Modified.IsZero() {
			return fmt.Errorf("info %+v: want size %d and a modification time", info, sizes[info.Key])
		}
		return nil
	})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
}

func testListStop(t *testing.T, s objstore.Store) {
	for _, k := range []string{"s/1", "s/2", "s/3"} {
		mustPut(t, s, k, []byte(k))
	}
	stop := errors.New("enough")
	var seen []string
	err := s.List(ctx(t), "s/", func(info objstore.Info) error {
		seen = append(seen, info.Key)
		if len(seen) == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || !slices.Equal(seen, []string{"s/1", "s/2"}) {
		t.Fatalf("List stopped with %v after %q; want %v after [s/1 s/2]", err, seen, stop)
	}
}

func testDelete(t *testing.T, s objstore.Store) {
	mustPut(t, s, "d/one/x", []byte("x"))
	mustPut(t, s, "d/two", []byte("y"))
	if err := s.Delete(ctx(t), "d/one/x"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err := s.Get(ctx(t), "d/one/x", 0, -1)
	wantNotFound(t, "Get after Delete", err)
	_, err = s.Head(ctx(t), "d/one/x")
	wantNotFound(t, "Head after Delete", err)
	if got := keys(t, s, ""); !slices.Equal(got, []string{"d/two"}) {
		t.Fatalf("List after Delete = %q, want [d/two]", got)
	}
	for _, key := range []string{"d/one/x", "never", "d/one", "d/two/deeper"} {
		if err := s.Delete(ctx(t), key); err != nil {
			t.Fatalf("Delete(%q) of a missing key: %v, want success", key, err)
		}
	}
	mustPut(t, s, "d/one/x", []byte("again"))
	if got := mustGet(t, s, "d/one/x", 0, -1); string(got) != "again" {
		t.Fatalf("Get after Put after Delete = %q", got)
	}
}

func testOverwrite(t *testing.T, s objstore.Store) {
	mustPut(t, s, "o", bytes.Repeat([]byte("1"), 1000))
	mustPut(t, s, "o", []byte("22"))
	if got := mustGet(t, s, "o", 0, -1); string(got) != "22" {
		t.Fatalf("Get after overwrite = %d bytes %.10q, want \"22\"", len(got), got)
	}
	if info, err := s.Head(ctx(t), "o"); err != nil || info.Size != 2 {
		t.Fatalf("Head after overwrite = %+v, %v; want size 2", info, err)
	}
}

// testOverwriteAtomic overwrites one key with two versions of different
// sizes while readers check that every Get returns one version whole.
func testOverwriteAtomic(t *testing.T, s objstore.Store) {
	versions := [][]byte{bytes.Repeat([]byte{'A'}, 300<<10), bytes.Repeat([]byte{'B'}, 200<<10+7)}
	mustPut(t, s, "atomic", versions[0])
	const writes, readers = 16, 3
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				got, err := s.Get(ctx(t), "atomic", 0, -1)
				if err != nil {
					t.Errorf("Get during overwrite: %v", err)
					return
				}
				if !bytes.Equal(got, versions[0]) && !bytes.Equal(got, versions[1]) {
					t.Errorf("Get during overwrite returned %d bytes that are neither version", len(got))
					return
				}
			}
		})
	}
	for i := range writes {
		if err := s.Put(ctx(t), "atomic", versions[(i+1)%2]); err != nil {
			t.Errorf("Put %d: %v", i, err)
			break
		}
	}
	close(done)
	wg.Wait()
}

func testBuffersNotShared(t *testing.T, s objstore.Store) {
	body := []byte("original")
	mustPut(t, s, "buf", body)
	copy(body, "CHANGED!")
	got := mustGet(t, s, "buf", 0, -1)
	if string(got) != "original" {
		t.Fatalf("the store kept the caller's buffer: Get = %q", got)
	}
	copy(got, "CHANGED!")
	if got := mustGet(t, s, "buf", 0, -1); string(got) != "original" {
		t.Fatalf("the store handed out its own buffer: Get = %q", got)
	}
}

func testLargeObject(t *testing.T, s objstore.Store) {
	body := make([]byte, 9<<20)
	r := rand.New(rand.NewPCG(7, 9))
	for i := 0; i < len(body); i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < len(body); j++ {
			body[i+j] = byte(v >> (8 * j))
		}
	}
	mustPut(t, s, "large/object", body)
	if info, err := s.Head(ctx(t), "large/object"); err != nil || info.Size != int64(len(body)) {
		t.Fatalf("Head = %+v, %v; want size %d", info, err, len(body))
	}
	if got := mustGet(t, s, "large/object", 0, -1); !bytes.Equal(got, body) {
		t.Fatalf("Get of 9 MiB returned %d bytes that differ", len(got))
	}
	off := int64(8<<20 - 4096) // across the 8 MiB mark
	if got := mustGet(t, s, "large/object", off, 1<<20); !bytes.Equal(got, body[off:off+1<<20]) {
		t.Fatalf("ranged Get across 8 MiB returned %d bytes that differ", len(got))
	}
	if got := mustGet(t, s, "large/object", int64(len(body))-10, 100); !bytes.Equal(got, body[len(body)-10:]) {
		t.Fatalf("ranged Get of the tail returned %d bytes that differ", len(got))
	}
}

func testInvalidKey(t *testing.T, s objstore.Store) {
	for _, key := range []string{"", "/a", "a/", "a//b", "./a", "a/./b", "a/../b", "..", "a\x00b", "\xff"} {
		checks := map[string]error{
			"Put":    s.Put(ctx(t), key, []byte("x")),
			"Delete": s.Delete(ctx(t), key),
		}
		_, checks["Get"] = s.Get(ctx(t), key, 0, -1)
		_, checks["Head"] = s.Head(ctx(t), key)
		for op, err := range checks {
			if !errors.Is(err, objstore.ErrInvalidKey) || objstore.IsRetriable(err) {
				t.Errorf("%s(%q) = %v, want final objstore.ErrInvalidKey", op, key, err)
			}
		}
	}
	if got := keys(t, s, ""); len(got) != 0 {
		t.Fatalf("invalid keys left objects: %q", got)
	}
}

// testConcurrentPutDelete puts and deletes keys that share directories from
// several goroutines; a directory store must not lose a Put's directory to
// another key's Delete.
func testConcurrentPutDelete(t *testing.T, s objstore.Store) {
	const workers, rounds = 6, 12
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				key := fmt.Sprintf("c/shared/%d/k%d", i%2, w)
				if err := s.Put(ctx(t), key, []byte(key)); err != nil {
					t.Errorf("Put(%q): %v", key, err)
					return
				}
				if got, err := s.Get(ctx(t), key, 0, -1); err != nil || string(got) != key {
					t.Errorf("Get(%q) = %q, %v", key, got, err)
					return
				}
				if err := s.Delete(ctx(t), key); err != nil {
					t.Errorf("Delete(%q): %v", key, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := keys(t, s, ""); len(got) != 0 {
		t.Fatalf("keys left after every Delete: %q", got)
	}
}

func testContextCancelled(t *testing.T, s objstore.Store) {
	mustPut(t, s, "exists", []byte("x"))
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	_, getErr := s.Get(c, "exists", 0, -1)
	_, headErr := s.Head(c, "exists")
	calls := map[string]error{
		"Put":    s.Put(c, "cancelled", []byte("x")),
		"Get":    getErr,
		"Head":   headErr,
		"List":   s.List(c, "", func(objstore.Info) error { return nil }),
		"Delete": s.Delete(c, "exists"),
	}
	for op, err := range calls {
		if !errors.Is(err, context.Canceled) || objstore.IsRetriable(err) {
			t.Errorf("%s with a cancelled context = %v, want final context.Canceled", op, err)
		}
	}
	_, err := s.Head(ctx(t), "cancelled")
	wantNotFound(t, "Head of a key whose Put was cancelled", err)
	if _, err := s.Head(ctx(t), "exists"); err != nil {
		t.Fatalf("Head of a key whose Delete was cancelled: %v", err)
	}
}
