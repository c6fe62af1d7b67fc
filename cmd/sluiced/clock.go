package main

// clock.go owns the offset clock behind --clock-offset-file, a testing aid:
// the chaos suite jumps a running broker's clock forward and back by writing
// a duration into a file, without touching the machine's clock (which the
// other brokers, etcd and the S3 server share).
//
// Invariant: offset holds the last duration read successfully from the file
// (0 until then, and 0 while the file is missing); Now is the wall clock
// plus offset, so every reader of the clock sees a jump at the same instant.

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// clockPoll is how often the offset file is read.
const clockPoll = 100 * time.Millisecond

// offsetClock is the wall clock shifted by a duration read from a file.
type offsetClock struct {
	path   string
	offset atomic.Int64 // nanoseconds
	log    zerolog.Logger
}

// newOffsetClock reads path once, so the broker starts with the offset in
// force, and returns the clock.
func newOffsetClock(path string, log zerolog.Logger) *offsetClock {
	c := &offsetClock{path: path, log: log}
	c.read()
	return c
}

// Now is the shifted wall clock. time.Time.Add moves the monotonic reading
// too, so durations measured across a jump include it, as they would on a
// machine whose clock jumped.
func (c *offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// run re-reads the file until ctx ends.
func (c *offsetClock) run(ctx context.Context) {
	t := time.NewTicker(clockPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.read()
		}
	}
}

// read takes the file's duration ("90m", "-2h"); a missing file is 0, and
// a malformed one is logged and ignored (the offset stays).
func (c *offsetClock) read() {
	data, err := os.ReadFile(c.path)
	var d time.Duration
	switch {
	case os.IsNotExist(err):
	case err != nil:
		c.log.Warn().Err(err).Str("path", c.path).Msg("clock offset file unreadable; offset kept")
		return
	default:
		if d, err = time.ParseDuration(strings.TrimSpace(string(data))); err != nil {
			c.log.Warn().Err(err).Str("path", c.path).Msg("clock offset file malformed; offset kept")
			return
		}
	}
	if old := time.Duration(c.offset.Swap(int64(d))); old != d {
		c.log.Warn().Int64("from_ms", old.Milliseconds()).Int64("to_ms", d.Milliseconds()).Msg("clock offset changed (--clock-offset-file)")
	}
}
