package objstore

// retriable.go owns IsRetriable, the one place that decides whether a failed
// call may be tried again. It reads errors by the methods they carry, so it
// needs neither the AWS SDK nor any implementation: the SDK's errors have
// HTTPStatusCode and ErrorCode, its send failures ConnectionError, the fault
// wrapper's errors Retriable.
//
// Invariant: ErrNotFound, ErrInvalidKey, ErrInvalidRange and the caller's own
// cancellation are never retriable, whatever else the chain holds; an error
// nothing here recognises is not retriable.

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
)

// retriableCodes are the service error codes of transient failures: S3's and
// the AWS SDK's throttling and timeout codes, and one of Versity's gateway.
// RetriableCode exposes the table to the S3 store's retryer.
var retriableCodes = map[string]bool{
	"SlowDown":                 true,
	"Throttling":               true,
	"ThrottlingException":      true,
	"RequestThrottled":         true,
	"RequestLimitExceeded":     true,
	"TooManyRequestsException": true,
	"BandwidthLimitExceeded":   true,
	"RequestTimeout":           true,
	"RequestTimeoutException":  true,
	"InternalError":            true,
	"ServiceUnavailable":       true,
	"PriorRequestNotComplete":  true,
	// Versity's gateway (posix backend, v1.8.0) answers a PUT with this 409
	// when a DELETE removed the now empty parent directory between the PUT's
	// mkdir and its link: a race, gone on the next attempt. Tiering keys are
	// never a directory of other keys, so the genuine conflict does not occur.
	"ExistingObjectIsDirectory": true,
}

// IsRetriable reports whether err is a transient failure of an object store:
// a deadline, an HTTP 5xx, 429 or 408, throttling (SlowDown), a refused, reset
// or cut connection. See the invariant above for what never is.
func IsRetriable(err error) bool {
	if err == nil ||
		errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalidKey) || errors.Is(err, ErrInvalidRange) ||
		errors.Is(err, context.Canceled) {
		return false
	}
	var marked interface{ Retriable() bool }
	if errors.As(err, &marked) {
		return marked.Retriable()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) {
		if c := status.HTTPStatusCode(); c >= 500 || c == 429 || c == 408 {
			return true
		}
	}
	var coded interface{ ErrorCode() string }
	if errors.As(err, &coded) && retriableCodes[coded.ErrorCode()] {
		return true
	}
	return isConnectionError(err)
}

// RetriableCode reports whether an S3 error code names a transient failure.
func RetriableCode(code string) bool { return retriableCodes[code] }

// isConnectionError recognises a failure of the connection rather than of the
// request: refused, reset, cut short, timed out.
func isConnectionError(err error) bool {
	var conn interface{ ConnectionError() bool }
	if errors.As(err, &conn) && conn.ConnectionError() {
		return true
	}
	var timeout interface{ Timeout() bool }
	if errors.As(err, &timeout) && timeout.Timeout() {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && !dns.IsNotFound {
		return true
	}
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
		syscall.EPIPE, syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH,
		io.ErrUnexpectedEOF, net.ErrClosed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
