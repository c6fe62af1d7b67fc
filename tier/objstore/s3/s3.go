package s3

// s3.go owns the S3 Store: building the SDK client (endpoint, path-style
// addressing, credentials, retryer) and the five calls, each under its own
// deadline, with the service's errors mapped onto objstore's.
//
// Invariant: no call reaches the network without a deadline: every one runs
// under context.WithTimeout(ctx, timeout), a List page under its own.
// Invariant: keys the caller sees never include the prefix.
// A Store's only mutable state is bucketSeen (atomic, set once); the SDK
// client is safe for concurrent use.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/tier/objstore"
)

// defaultRegion is used when neither the Config nor the environment names one.
const defaultRegion = "us-east-1"

// Store is an objstore.Store on an S3 bucket.
type Store struct {
	client   *s3.Client
	bucket   string
	prefix   string
	timeout  time.Duration // bounds each call, retries included
	attempts int           // bounds the attempts of one call
	log      zerolog.Logger

	// bucketSeen is set once the bucket answered HeadBucket: a 404 to HEAD
	// has no body to tell a missing key from a missing bucket, so the first
	// one asks.
	bucketSeen atomic.Bool
}

var _ objstore.Store = (*Store)(nil)

// New returns a Store for cfg. It does not touch the network: a wrong
// endpoint, bucket or key pair shows in the first call.
func New(ctx context.Context, cfg Config, opts objstore.Options) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	log := opts.Logger.With().Str("component", "objstore-s3").Str("bucket", cfg.Bucket).Logger()
	httpClient := awshttp.NewBuildableClient().WithDialerOptions(func(d *net.Dialer) {
		d.Timeout = min(opts.Timeout, 10*time.Second)
	})
	load := []func(*config.LoadOptions) error{
		config.WithHTTPClient(httpClient),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = opts.MaxAttempts
				o.MaxBackoff = min(5*time.Second, opts.Timeout/4)
				// The codes objstore calls transient that the SDK does not
				// retry by itself (Versity's ExistingObjectIsDirectory race).
				o.Retryables = append(o.Retryables, retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
					var api smithy.APIError
					if errors.As(err, &api) && objstore.RetriableCode(api.ErrorCode()) {
						return aws.TrueTernary
					}
					return aws.UnknownTernary
				}))
			})
		}),
		config.WithLogger(logAdapter{log}),
		config.WithClientLogMode(aws.LogRetries),
	}
	if cfg.Region != "" {
		load = append(load, config.WithRegion(cfg.Region))
	}
	if opts.AccessKey != "" {
		load = append(load, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(opts.AccessKey, opts.SecretKey, "")))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("s3: load AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = defaultRegion
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.UsePathStyle = true
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		// Ranged GETs carry no whole-object checksum; that is expected.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	return &Store{
		client:   client,
		bucket:   cfg.Bucket,
		prefix:   cfg.Prefix,
		timeout:  opts.Timeout,
		attempts: opts.MaxAttempts,
		log:      log,
	}, nil
}

// begin checks key and returns the call's deadline-bounded context.
func (s *Store) begin(ctx context.Context, op, key string) (context.Context, context.CancelFunc, error) {
	if err := objstore.ValidKey(key); err != nil {
		return nil, nil, fmt.Errorf("s3: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("s3: %s %q: %w", op, key, err)
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	return cctx, cancel, nil
}

// Put implements objstore.Store. A PUT replaces the object whole.
func (s *Store) Put(ctx context.Context, key string, body []byte) error {
	ctx, cancel, err := s.begin(ctx, "put", key)
	if err != nil {
		return err
	}
	defer cancel()
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.prefix + key),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
	})
	if err != nil {
		return wrap("put", key, err)
	}
	return nil
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	ctx, cancel, err := s.begin(ctx, "get", key)
	if err != nil {
		return nil, err
	}
	defer cancel()
	if off < 0 {
		return nil, fmt.Errorf("s3: get %q: %w: offset %d", key, objstore.ErrInvalidRange, off)
	}
	if n == 0 {
		// No Range header can ask for nothing; the size decides.
		return s.empty(ctx, key, off, n)
	}
	for attempt := 1; ; attempt++ {
		b, inBody, err := s.getOnce(ctx, key, off, n)
		if err == nil {
			return b, nil
		}
		if !inBody || attempt >= s.attempts || ctx.Err() != nil || !objstore.IsRetriable(err) {
			return nil, err
		}
		s.log.Debug().Err(err).Str("key", key).Int("attempt", attempt).Msg("retrying a GET whose body was cut off")
	}
}

// getOnce sends one GET (the SDK retries it) and reads its body; inBody
// reports a failure while reading the body, which the SDK does not retry.
func (s *Store) getOnce(ctx context.Context, key string, off, n int64) (_ []byte, inBody bool, _ error) {
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key)}
	switch {
	case n > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	case off > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", off))
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		if isInvalidRange(err) {
			b, err := s.empty(ctx, key, off, n)
			return b, false, err
		}
		return nil, false, wrap("get", key, err)
	}
	defer func() { _ = out.Body.Close() }()
	b, err := readBody(out.Body, out.ContentLength)
	if err != nil {
		return nil, true, fmt.Errorf("s3: get %q: read body: %w", key, err)
	}
	return b, false, nil
}

// empty answers a Get that S3 cannot express or refused with 416: the range
// starts at or after the end (S3 refuses "bytes=size-"), or asks for nothing.
func (s *Store) empty(ctx context.Context, key string, off, n int64) ([]byte, error) {
	info, err := s.head(ctx, "get", key)
	if err != nil {
		return nil, err
	}
	start, end, err := objstore.ResolveRange(info.Size, off, n)
	if err != nil {
		return nil, fmt.Errorf("s3: get %q: %w", key, err)
	}
	if start != end {
		// The object grew between the GET and the HEAD: a concurrent Put.
		return nil, fmt.Errorf("s3: get %q: range [%d, %d) refused, yet the object has %d bytes: %w",
			key, start, end, info.Size, errConcurrentPut)
	}
	return []byte{}, nil
}

// errConcurrentPut is retriable: the object changed during a Get.
var errConcurrentPut = retriableError("object replaced during the call")

type retriableError string

func (e retriableError) Error() string   { return string(e) }
func (e retriableError) Retriable() bool { return true }

// Head implements objstore.Store.
func (s *Store) Head(ctx context.Context, key string) (objstore.Info, error) {
	ctx, cancel, err := s.begin(ctx, "head", key)
	if err != nil {
		return objstore.Info{}, err
	}
	defer cancel()
	return s.head(ctx, "head", key)
}

func (s *Store) head(ctx context.Context, op, key string) (objstore.Info, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	})
	if err != nil {
		err = wrap(op, key, err)
		if errors.Is(err, objstore.ErrNotFound) {
			if berr := s.checkBucket(ctx); berr != nil {
				return objstore.Info{}, fmt.Errorf("s3: %s %q: %w", op, key, berr)
			}
		}
		return objstore.Info{}, err
	}
	return objstore.Info{Key: key, Size: aws.ToInt64(out.ContentLength), Modified: aws.ToTime(out.LastModified)}, nil
}

// checkBucket returns an error if the bucket does not exist, asking the
// service until it once said it does.
func (s *Store) checkBucket(ctx context.Context) error {
	if s.bucketSeen.Load() {
		return nil
	}
	_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.bucket)})
	if err != nil {
		var resp *awshttp.ResponseError
		if errors.As(err, &resp) && resp.HTTPStatusCode() == 404 {
			return fmt.Errorf("no such bucket %q: %w", s.bucket, err)
		}
		return fmt.Errorf("head bucket %q: %w", s.bucket, err)
	}
	s.bucketSeen.Store(true)
	return nil
}

// List implements objstore.Store. Keys that are not valid object keys (a
// directory marker "a/" some services list) are skipped.
func (s *Store) List(ctx context.Context, prefix string, fn func(objstore.Info) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("s3: list %q: %w", prefix, err)
	}
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket),
		Prefix: aws.String(s.prefix + prefix),
	})
	last := ""
	for pages.HasMorePages() {
		page, err := s.listPage(ctx, pages)
		if err != nil {
			return fmt.Errorf("s3: list %q: %w", prefix, err)
		}
		for _, obj := range page.Contents {
			key, ok := strings.CutPrefix(aws.ToString(obj.Key), s.prefix)
			if !ok || objstore.ValidKey(key) != nil {
				continue
			}
			if key <= last && last != "" {
				return fmt.Errorf("s3: list %q: the service listed %q after %q, out of order", prefix, key, last)
			}
			last = key
			if err := fn(objstore.Info{Key: key, Size: aws.ToInt64(obj.Size), Modified: aws.ToTime(obj.LastModified)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// listPage fetches the next page under its own deadline.
func (s *Store) listPage(ctx context.Context, pages *s3.ListObjectsV2Paginator) (*s3.ListObjectsV2Output, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return pages.NextPage(ctx)
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	ctx, cancel, err := s.begin(ctx, "delete", key)
	if err != nil {
		return err
	}
	defer cancel()
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	})
	if err != nil {
		if err := wrap("delete", key, err); !errors.Is(err, objstore.ErrNotFound) {
			return err
		}
	}
	return nil
}

// wrap names the operation and key, and marks a missing object.
func wrap(op, key string, err error) error {
	if isNotFound(err) {
		return fmt.Errorf("s3: %s %q: %w: %w", op, key, objstore.ErrNotFound, err)
	}
	return fmt.Errorf("s3: %s %q: %w", op, key, err)
}

// isNotFound recognises a missing object, and not a missing bucket.
func isNotFound(err error) bool {
	var noKey *types.NoSuchKey
	var notFound *types.NotFound
	if errors.As(err, &noKey) || errors.As(err, &notFound) {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return true
		case "NoSuchBucket":
			return false
		}
	}
	var resp *awshttp.ResponseError
	return errors.As(err, &resp) && resp.HTTPStatusCode() == 404
}

// isInvalidRange recognises S3's 416 for a range that starts at or past the end.
func isInvalidRange(err error) bool {
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "InvalidRange" {
		return true
	}
	var resp *awshttp.ResponseError
	return errors.As(err, &resp) && resp.HTTPStatusCode() == 416
}

// logAdapter sends the SDK's log lines (its retries) to zerolog.
type logAdapter struct{ log zerolog.Logger }

func (a logAdapter) Logf(c logging.Classification, format string, v ...any) {
	ev := a.log.Debug()
	if c == logging.Warn {
		ev = a.log.Warn()
	}
	ev.Msgf(format, v...)
}

// maxPresized bounds the buffer a GET allocates up front from the
// response's Content-Length (a chunk is ~4 MiB; a whole object read is at
// most an upload's size plus a footer).
const maxPresized = 256 << 20

// readBody reads a GET's body into one buffer sized from its length when
// known (io.ReadAll would grow and copy it several times: most of a cold
// replay's CPU), and checks that the whole body came.
func readBody(body io.Reader, length *int64) ([]byte, error) {
	if length == nil || *length < 0 || *length > maxPresized {
		b, err := io.ReadAll(body)
		if err == nil && length != nil && *length >= 0 && int64(len(b)) != *length {
			err = fmt.Errorf("read %d of %d bytes: %w", len(b), *length, io.ErrUnexpectedEOF)
		}
		return b, err
	}
	b := make([]byte, *length)
	n, err := io.ReadFull(body, b)
	if err != nil {
		return nil, fmt.Errorf("read %d of %d bytes: %w", n, *length, err)
	}
	return b, nil
}
