package wal

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Sentinel errors; wrapped errors from this package match them with errors.Is.
var (
	// ErrCorrupt marks data that fails its checksum or structure. It never
	// marks a transient I/O error.
	ErrCorrupt = errors.New("wal: corrupt data")
	// ErrClosed is returned by every operation on a closed Log.
	ErrClosed = errors.New("wal: log closed")
	// ErrOffsetOutOfRange is returned for offsets below StartOffset or above EndOffset.
	ErrOffsetOutOfRange = errors.New("wal: offset out of range")
	// ErrInvalidBatch is returned by Append for bytes that are not one whole
	// well-formed v2 record batch, and by AppendStamped for a wrong base offset.
	ErrInvalidBatch = errors.New("wal: invalid record batch")
	// ErrNotBatchBoundary is returned by Truncate for an offset inside a batch.
	ErrNotBatchBoundary = errors.New("wal: offset is not a batch boundary")
	// ErrUnknownVersion marks a file written in a format version this build
	// does not read (by a newer Sluice); Open refuses the log rather than
	// guess.
	ErrUnknownVersion = errors.New("wal: unknown format version")
	// ErrInvalidConfig is returned by Config.Validate.
	ErrInvalidConfig = errors.New("wal: invalid config")
	// ErrStaleEpoch is returned by the appends for a batch whose leader
	// epoch is below the log's last epoch (LastEpoch): epochs never
	// decrease along a log (epochs.go).
	ErrStaleEpoch = errors.New("wal: leader epoch below the log's last epoch")
	// ErrFencedEpoch is returned by Append and AppendGroup for an epoch
	// below the fenced epoch (SetFencedEpoch).
	ErrFencedEpoch = errors.New("wal: leader epoch is fenced")
)

// Defaults applied by Config.WithDefaults.
const (
	DefaultSegmentBytes       = 64 << 20
	DefaultSegmentAge         = 10 * time.Minute
	DefaultIndexIntervalBytes = 4096
	// MaxSegmentBytes bounds a segment so that positions fit the index's u32.
	MaxSegmentBytes = math.MaxInt32
)

// Config holds a Log's tunables. The zero value of each field means its default.
// It has no retention settings: the log decides no deletion (doc.go).
type Config struct {
	// SegmentBytes: roll before an append would make the active segment exceed
	// this (a batch larger than it gets a segment of its own). Default 64 MiB.
	SegmentBytes int64
	// SegmentAge: roll a non-empty active segment older than this, by the wall
	// clock of its creation (or of the Open that recovered it). Default 10 min.
	SegmentAge time.Duration
	// IndexIntervalBytes: bytes between offset and time index entries. Default 4096.
	IndexIntervalBytes int
	// CacheTailBytes: after each fsync of the segments, the log's durable
	// bytes older than its newest CacheTailBytes are dropped from the page
	// cache (cache.go). Zero (the default) or negative: the kernel decides.
	CacheTailBytes int64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.SegmentBytes == 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.SegmentAge == 0 {
		c.SegmentAge = DefaultSegmentAge
	}
	if c.IndexIntervalBytes == 0 {
		c.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports fields no default can fix. Zero fields are valid (they mean
// the default).
func (c Config) Validate() error {
	switch {
	case c.SegmentBytes < 0 || c.SegmentBytes > MaxSegmentBytes:
		return fmt.Errorf("wal: segment bytes %d not in [1, %d]: %w", c.SegmentBytes, MaxSegmentBytes, ErrInvalidConfig)
	case c.SegmentAge < 0:
		return fmt.Errorf("wal: segment age %v < 0: %w", c.SegmentAge, ErrInvalidConfig)
	case c.IndexIntervalBytes < 0:
		return fmt.Errorf("wal: index interval %d < 0: %w", c.IndexIntervalBytes, ErrInvalidConfig)
	}
	return nil
}
