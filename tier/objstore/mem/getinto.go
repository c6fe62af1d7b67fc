package mem

import (
	"context"
	"fmt"

	"github.com/sluice-mq/sluice/tier/objstore"
)

var _ objstore.RangeReader = (*Store)(nil)

// GetInto implements objstore.RangeReader.
func (s *Store) GetInto(ctx context.Context, key string, off int64, p []byte) (int, error) {
	if err := check(ctx, "get", key); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, ok := s.objects[key]
	if !ok {
		return 0, fmt.Errorf("mem: get %q: %w", key, objstore.ErrNotFound)
	}
	start, end, err := objstore.ResolveRange(int64(len(obj.body)), off, int64(len(p)))
	if err != nil {
		return 0, fmt.Errorf("mem: get %q: %w", key, err)
	}
	return copy(p, obj.body[start:end]), nil
}
