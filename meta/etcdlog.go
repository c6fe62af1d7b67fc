package meta

// This file owns the bridge from etcd's zap logs to Sluice's zerolog logger,
// so embedded etcd and the etcd client log through the same sink as the rest
// of the process, at warn level and above.
//
// Invariant: the bridge never exits or panics the process itself; zap's own
// Panic/Fatal semantics still apply after Write returns.

import (
	"sync/atomic"

	"github.com/rs/zerolog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcdLogLevel is the least severe zap level forwarded.
const etcdLogLevel = zapcore.WarnLevel

// newEtcdLogger returns a zap logger that forwards warn and above to log,
// with component=etcd. Once *stopping is set, entries are logged at debug:
// etcd reports its own listeners closing during a clean stop as errors.
func newEtcdLogger(log zerolog.Logger, stopping *atomic.Bool) *zap.Logger {
	return zap.New(&zerologCore{log: log.With().Str("component", "etcd").Logger(), stopping: stopping})
}

// zerologCore is a zapcore.Core writing to a zerolog logger. It is immutable;
// With returns a copy.
type zerologCore struct {
	log      zerolog.Logger
	fields   []zapcore.Field // from With, written before each entry's own fields
	stopping *atomic.Bool    // nil or false: normal levels
}

func (c *zerologCore) Enabled(l zapcore.Level) bool { return l >= etcdLogLevel }

func (c *zerologCore) With(fields []zapcore.Field) zapcore.Core {
	merged := make([]zapcore.Field, 0, len(c.fields)+len(fields))
	merged = append(merged, c.fields...)
	merged = append(merged, fields...)
	return &zerologCore{log: c.log, fields: merged, stopping: c.stopping}
}

func (c *zerologCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *zerologCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	// WithLevel, unlike Fatal() and Panic(), never exits or panics.
	level := zerologLevel(e.Level)
	if c.stopping != nil && c.stopping.Load() && level < zerolog.FatalLevel {
		level = zerolog.DebugLevel
	}
	ev := c.log.WithLevel(level)
	if e.LoggerName != "" {
		ev = ev.Str("logger", e.LoggerName)
	}
	if e.Stack != "" {
		ev = ev.Str("stack", e.Stack)
	}
	ev.Fields(enc.Fields).Msg(e.Message)
	return nil
}

func (c *zerologCore) Sync() error { return nil }

func zerologLevel(l zapcore.Level) zerolog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return zerolog.DebugLevel
	case l == zapcore.InfoLevel:
		return zerolog.InfoLevel
	case l == zapcore.WarnLevel:
		return zerolog.WarnLevel
	case l == zapcore.ErrorLevel:
		return zerolog.ErrorLevel
	case l == zapcore.FatalLevel:
		return zerolog.FatalLevel
	default: // DPanic, Panic
		return zerolog.PanicLevel
	}
}
