package cache

// config.go owns the cache's tunables, their defaults and the package's
// sentinel errors.
//
// Invariant: a Cache only ever runs with a Config that passed Validate after
// WithDefaults, so 1 <= ReservedGetFills <= MaxConcurrentFills.

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors; wrapped errors from this package match them with errors.Is.
var (
	// ErrClosed is returned by Get once Close has begun, and by a fill that
	// was still waiting for a slot when Close began.
	ErrClosed = errors.New("cache: closed")
	// ErrInvalidConfig is returned by Config.Validate and New.
	ErrInvalidConfig = errors.New("cache: invalid config")
)

// Defaults applied by Config.WithDefaults.
const (
	DefaultMaxBytes           = 1 << 30
	DefaultMaxConcurrentFills = 8
	DefaultReservedGetFills   = 2
	DefaultFillTimeout        = 30 * time.Second
)

// Config holds a Cache's tunables. The zero value of each field means its
// default.
type Config struct {
	// MaxBytes bounds the bytes of cached entries (the sum of their lengths,
	// an empty one counting 1; the bookkeeping, a few hundred bytes an
	// entry, is not counted). An entry longer than MaxBytes is returned to
	// its waiters but never cached. Default 1 GiB.
	MaxBytes int64
	// MaxConcurrentFills bounds the fills running at once, started by Get and
	// by Prefetch together. Default 8.
	MaxConcurrentFills int
	// ReservedGetFills of those slots only Get's fills may take, so read-ahead
	// can never starve a reader that waits for its chunk. Prefetch uses the
	// other MaxConcurrentFills-ReservedGetFills slots (none if they are
	// equal: prefetch is then off). Default 2, or MaxConcurrentFills if that
	// is smaller.
	ReservedGetFills int
	// FillTimeout is the deadline of a fill's own context, counted from the
	// moment the fill is started (waiting for a slot included). It bounds how
	// long Close waits, provided fills honour their context. Default 30 s.
	FillTimeout time.Duration
	// FillGate, if set, is passed by every fill a Get starts before it
	// takes its slot, with the Get's context values (the broker's fair
	// backfill lane reads the tenant there and orders tenants' GETs by
	// deficit round robin). It returns the function that gives the gate
	// back, told the bytes the fill read. Prefetches do not pass it: they
	// never wait.
	FillGate func(ctx context.Context) (done func(bytes int), err error)
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxConcurrentFills == 0 {
		c.MaxConcurrentFills = DefaultMaxConcurrentFills
	}
	if c.ReservedGetFills == 0 {
		c.ReservedGetFills = min(DefaultReservedGetFills, c.MaxConcurrentFills)
	}
	if c.FillTimeout == 0 {
		c.FillTimeout = DefaultFillTimeout
	}
	return c
}

// Validate reports fields no default can fix. Zero fields are valid (they
// mean the default).
func (c Config) Validate() error {
	fills := c.MaxConcurrentFills
	if fills == 0 {
		fills = DefaultMaxConcurrentFills
	}
	switch {
	case c.MaxBytes < 0:
		return fmt.Errorf("cache: max bytes %d < 0: %w", c.MaxBytes, ErrInvalidConfig)
	case c.MaxConcurrentFills < 0:
		return fmt.Errorf("cache: max concurrent fills %d < 0: %w", c.MaxConcurrentFills, ErrInvalidConfig)
	case c.ReservedGetFills < 0:
		return fmt.Errorf("cache: reserved get fills %d < 0: %w", c.ReservedGetFills, ErrInvalidConfig)
	case c.ReservedGetFills > fills:
		return fmt.Errorf("cache: reserved get fills %d > max concurrent fills %d: %w",
			c.ReservedGetFills, fills, ErrInvalidConfig)
	case c.FillTimeout < 0:
		return fmt.Errorf("cache: fill timeout %v < 0: %w", c.FillTimeout, ErrInvalidConfig)
	}
	return nil
}
