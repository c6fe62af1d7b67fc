package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/freeport"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sluice-mq/sluice/tier/objstore"
)

// responseError is the SDK's error for an HTTP status, as an S3 call returns it.
func responseError(status int, code string) error {
	resp := &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
		Err:      &smithy.GenericAPIError{Code: code},
	}}
	return &smithy.OperationError{ServiceID: "S3", OperationName: "GetObject", Err: resp}
}

// marked is an error that says whether it is retriable.
type marked bool

func (m marked) Error() string   { return fmt.Sprintf("marked %v", bool(m)) }
func (m marked) Retriable() bool { return bool(m) }

func TestIsRetriable(t *testing.T) {
	var refused error
	if c, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", closedPort(t)); err == nil {
		_ = c.Close()
		t.Fatal("dialled a closed port")
	} else {
		refused = err
	}
	corrupt := errors.New("tier: object footer checksum mismatch")
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"not found", fmt.Errorf("get: %w", objstore.ErrNotFound), false},
		{"not found with a 404", fmt.Errorf("get: %w: %w", objstore.ErrNotFound, responseError(404, "NoSuchKey")), false},
		{"invalid key", objstore.ValidKey(""), false},
		{"invalid range", fmt.Errorf("x: %w", objstore.ErrInvalidRange), false},
		{"corruption", corrupt, false},
		{"unknown", errors.New("something else"), false},
		{"caller cancelled", fmt.Errorf("put: %w", context.Canceled), false},
		{"cancelled, though marked", fmt.Errorf("%w: %w", marked(true), context.Canceled), false},
		{"deadline", fmt.Errorf("put: %w", context.DeadlineExceeded), true},
		{"SDK cancelled by deadline", &aws.RequestCanceledError{Err: &url.Error{Op: "Get", URL: "u", Err: context.DeadlineExceeded}}, true},
		{"500", responseError(500, "InternalError"), true},
		{"503 SlowDown", responseError(503, "SlowDown"), true},
		{"429", responseError(429, ""), true},
		{"408", responseError(408, ""), true},
		{"400 RequestTimeout", responseError(400, "RequestTimeout"), true},
		{"403", responseError(403, "AccessDenied"), false},
		{"404 NoSuchBucket", responseError(404, "NoSuchBucket"), false},
		{"400 InvalidArgument", responseError(400, "InvalidArgument"), false},
		{"409 Versity directory race", responseError(409, "ExistingObjectIsDirectory"), true},
		{"409 BucketAlreadyExists", responseError(409, "BucketAlreadyExists"), false},
		{"retries exhausted on 503", &retry.MaxAttemptsError{Attempt: 3, Err: responseError(503, "SlowDown")}, true},
		{"marked retriable", fmt.Errorf("x: %w", marked(true)), true},
		{"marked final", fmt.Errorf("x: %w", marked(false)), false},
		{"connection refused", refused, true},
		{"send error", &smithyhttp.RequestSendError{Err: errors.New("boom")}, true},
		{"reset", &url.Error{Op: "Put", URL: "u", Err: syscall.ECONNRESET}, true},
		{"broken pipe", fmt.Errorf("write: %w", syscall.EPIPE), true},
		{"cut body", fmt.Errorf("read body: %w", io.ErrUnexpectedEOF), true},
		{"net timeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, true},
		{"dns failure", &net.DNSError{Err: "server misbehaving", Name: "s3", IsTemporary: true}, true},
		{"no such host", &net.DNSError{Err: "no such host", Name: "s3", IsNotFound: true}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := objstore.IsRetriable(tc.err); got != tc.want {
				t.Fatalf("IsRetriable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }

// closedPort returns an address on 127.0.0.1 where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	return freeport.Must(t)
}

func TestValidKey(t *testing.T) {
	valid := []string{"a", "a/b", "topic-1/00000000000000000042-7-uuid.seg", "a.b/c d/ü", ".hidden", "a/..b/c.", strings.Repeat("k", objstore.MaxKeyLen)}
	invalid := []string{"", "/", "/a", "a/", "a//b", ".", "..", "a/.", "a/../b", "./a", "a\x00", "\xff\xfe", strings.Repeat("k", objstore.MaxKeyLen+1)}
	for _, k := range valid {
		if err := objstore.ValidKey(k); err != nil {
			t.Errorf("ValidKey(%q) = %v, want nil", k, err)
		}
	}
	for _, k := range invalid {
		if err := objstore.ValidKey(k); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("ValidKey(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
}

func TestResolveRange(t *testing.T) {
	tests := []struct {
		size, off, n, start, end int64
		err                      bool
	}{
		{size: 10, off: 0, n: -1, start: 0, end: 10},
		{size: 10, off: 2, n: 3, start: 2, end: 5},
		{size: 10, off: 8, n: 5, start: 8, end: 10},
		{size: 10, off: 10, n: 5, start: 10, end: 10},
		{size: 10, off: 4, n: 0, start: 4, end: 4},
		{size: 0, off: 0, n: -1, start: 0, end: 0},
		{size: 10, off: 11, n: 1, err: true},
		{size: 10, off: -1, n: 1, err: true},
		{size: 1 << 40, off: 1, n: 1<<63 - 1, start: 1, end: 1 << 40}, // no overflow
	}
	for _, tc := range tests {
		start, end, err := objstore.ResolveRange(tc.size, tc.off, tc.n)
		if tc.err {
			if !errors.Is(err, objstore.ErrInvalidRange) {
				t.Errorf("ResolveRange(%d, %d, %d) = %v, want ErrInvalidRange", tc.size, tc.off, tc.n, err)
			}
			continue
		}
		if err != nil || start != tc.start || end != tc.end {
			t.Errorf("ResolveRange(%d, %d, %d) = [%d, %d), %v; want [%d, %d)", tc.size, tc.off, tc.n, start, end, err, tc.start, tc.end)
		}
	}
}

func TestOptions(t *testing.T) {
	o := objstore.Options{}.WithDefaults()
	if o.Timeout != objstore.DefaultTimeout || o.MaxAttempts != objstore.DefaultMaxAttempts {
		t.Fatalf("defaults = %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	set := objstore.Options{Timeout: time.Second, MaxAttempts: 1}.WithDefaults()
	if set.Timeout != time.Second || set.MaxAttempts != 1 {
		t.Fatalf("WithDefaults replaced set fields: %+v", set)
	}
	for _, bad := range []objstore.Options{
		{Timeout: -1},
		{MaxAttempts: -1},
		{AccessKey: "a"},
		{SecretKey: "s"},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", bad)
		}
	}
}
