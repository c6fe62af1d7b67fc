package objstore

// options.go owns Options, the tunables every store shares, and their
// defaults. Options is a value: stores copy it at construction.

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

const (
	// DefaultTimeout bounds one call, all of its attempts included.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxAttempts is how many times a call is tried in all.
	DefaultMaxAttempts = 4
)

// Options are shared by every Store implementation; each uses what applies.
// The zero value is valid: WithDefaults fills it in.
type Options struct {
	// Logger receives the store's warnings (retries, slow calls). The zero
	// value discards them.
	Logger zerolog.Logger
	// Timeout bounds one call, including its retries and its backoff;
	// 0 means DefaultTimeout.
	Timeout time.Duration
	// MaxAttempts bounds the attempts of one call (1 = no retry);
	// 0 means DefaultMaxAttempts.
	MaxAttempts int
	// AccessKey and SecretKey, when both are set, are the S3 credentials,
	// overriding the standard AWS chain (environment, shared files, IMDS).
	AccessKey, SecretKey string
}

// WithDefaults returns o with zero fields replaced by their defaults.
func (o Options) WithDefaults() Options {
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	return o
}

// Validate reports options no store can work with.
func (o Options) Validate() error {
	switch {
	case o.Timeout < 0:
		return fmt.Errorf("objstore: timeout %v is negative", o.Timeout)
	case o.MaxAttempts < 0:
		return fmt.Errorf("objstore: max attempts %d is negative", o.MaxAttempts)
	case (o.AccessKey == "") != (o.SecretKey == ""):
		return fmt.Errorf("objstore: access key and secret key must be given together")
	}
	return nil
}
