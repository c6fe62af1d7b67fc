package s3

import (
	"context"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-mq/sluice/tier/objstore"
)

var _ objstore.RangeReader = (*Store)(nil)

// GetInto implements objstore.RangeReader: Get's ranged GET, its body read
// into p (a body cut off is sent again, as Get does).
func (s *Store) GetInto(ctx context.Context, key string, off int64, p []byte) (int, error) {
	if len(p) == 0 {
		_, err := s.Get(ctx, key, off, 0)
		return 0, err
	}
	ctx, cancel, err := s.begin(ctx, "get", key)
	if err != nil {
		return 0, err
	}
	defer cancel()
	if off < 0 {
		return 0, fmt.Errorf("s3: get %q: %w: offset %d", key, objstore.ErrInvalidRange, off)
	}
	for attempt := 1; ; attempt++ {
		n, inBody, err := s.getIntoOnce(ctx, key, off, p)
		if err == nil {
			return n, nil
		}
		if !inBody || attempt >= s.attempts || ctx.Err() != nil || !objstore.IsRetriable(err) {
			return 0, err
		}
		s.log.Debug().Err(err).Str("key", key).Int("attempt", attempt).Msg("retrying a GET whose body was cut off")
	}
}

func (s *Store) getIntoOnce(ctx context.Context, key string, off int64, p []byte) (_ int, inBody bool, _ error) {
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key),
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+int64(len(p))-1))}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		if isInvalidRange(err) {
			_, err := s.empty(ctx, key, off, int64(len(p)))
			return 0, false, err
		}
		return 0, false, wrap("get", key, err)
	}
	defer func() { _ = out.Body.Close() }()
	want := len(p)
	if out.ContentLength != nil && *out.ContentLength >= 0 && *out.ContentLength < int64(want) {
		want = int(*out.ContentLength)
	}
	n, err := io.ReadFull(out.Body, p[:want])
	if err != nil {
		return 0, true, fmt.Errorf("s3: get %q: read body: read %d of %d bytes: %w", key, n, want, err)
	}
	return n, false, nil
}
