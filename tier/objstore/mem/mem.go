package mem

// mem.go owns the in-memory Store.
//
// Invariant: a stored []byte is never mutated or handed out: Put copies in,
// Get copies out, so callers may reuse their buffers.
// All state is guarded by Store.mu.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/tier/objstore"
)

// Store is an objstore.Store in memory.
type Store struct {
	now func() time.Time // the clock for Info.Modified

	mu      sync.Mutex
	objects map[string]object  // guarded by mu
	uploads map[string]*upload // guarded by mu (multipart.go)
}

type object struct {
	body     []byte
	modified time.Time
}

var _ objstore.Store = (*Store)(nil)

// New returns an empty store whose clock is time.Now.
func New() *Store { return NewWithClock(time.Now) }

// NewWithClock returns an empty store that stamps Info.Modified with now().
func NewWithClock(now func() time.Time) *Store {
	return &Store{now: now, objects: make(map[string]object)}
}

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, key string, body []byte) error {
	if err := check(ctx, "put", key); err != nil {
		return err
	}
	obj := object{body: append([]byte{}, body...), modified: s.now()}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = obj
	return nil
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := check(ctx, "get", key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	obj, ok := s.objects[key]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("mem: get %q: %w", key, objstore.ErrNotFound)
	}
	start, end, err := objstore.ResolveRange(int64(len(obj.body)), off, n)
	if err != nil {
		return nil, fmt.Errorf("mem: get %q: %w", key, err)
	}
	return append([]byte{}, obj.body[start:end]...), nil
}

// Head implements objstore.Store.
func (s *Store) Head(ctx context.Context, key string) (objstore.Info, error) {
	if err := check(ctx, "head", key); err != nil {
		return objstore.Info{}, err
	}
	s.mu.Lock()
	obj, ok := s.objects[key]
	s.mu.Unlock()
	if !ok {
		return objstore.Info{}, fmt.Errorf("mem: head %q: %w", key, objstore.ErrNotFound)
	}
	return objstore.Info{Key: key, Size: int64(len(obj.body)), Modified: obj.modified}, nil
}

// List implements objstore.Store. It lists a snapshot taken when it starts, so
// fn may call the store.
func (s *Store) List(ctx context.Context, prefix string, fn func(objstore.Info) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mem: list %q: %w", prefix, err)
	}
	var infos []objstore.Info
	s.mu.Lock()
	for k, obj := range s.objects {
		if strings.HasPrefix(k, prefix) {
			infos = append(infos, objstore.Info{Key: k, Size: int64(len(obj.body)), Modified: obj.modified})
		}
	}
	s.mu.Unlock()
	sort.Slice(infos, func(i, j int) bool { return infos[i].Key < infos[j].Key })
	for _, info := range infos {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("mem: list %q: %w", prefix, err)
		}
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := check(ctx, "delete", key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objects, key)
	return nil
}

// check refuses a call whose context is done or whose key is invalid.
func check(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mem: %s %q: %w", op, key, err)
	}
	if err := objstore.ValidKey(key); err != nil {
		return fmt.Errorf("mem: %s: %w", op, err)
	}
	return nil
}
