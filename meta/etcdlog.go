package meta

// This file owns the bridge from etcd's zap logs to Sluice's zerolog logger,
// so embedded etcd and the etcd client log through the same sink as the rest
// of the process, at warn level and above, and the summary of etcd's
// repeated warnings: while a peer is down etcd warns on every retry of its
// prober and its dials (several lines every few seconds, for as long as the
// outage lasts), so each warning message is written once per window and
// what repeats within the window is counted and written as one line when
// the window ends.
//
// Invariant: the bridge never exits or panics the process itself; zap's own
// Panic/Fatal semantics still apply after Write returns.
// Invariant: errors and worse are never summarised; a warning suppressed in
// a window is counted, and the count written by flush (Store's summary
// loop, and Close); none is dropped uncounted.
// Invariant: an etcd field never repeats a key the line already has
// (zerolog writes a key given twice twice); such a field is renamed
// etcd_<key>. A duration field's key ends in _ms, its value in milliseconds.
//
// etcdWarnings.mu guards its map; it is never held while writing a line.

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcdLogLevel is the least severe zap level forwarded.
const etcdLogLevel = zapcore.WarnLevel

// etcdWarnWindow is how long a warning message is written only once; what
// repeats within it is summarised when it ends.
const etcdWarnWindow = 30 * time.Second

// newEtcdLogger returns a zap logger that forwards warn and above to log,
// with component=etcd, repeated warnings summarised by the returned
// etcdWarnings (whose flush writes the counts). Once *stopping is set,
// entries are logged at debug: etcd reports its own listeners closing
// during a clean stop as errors.
func newEtcdLogger(log zerolog.Logger, stopping *atomic.Bool) (*zap.Logger, *etcdWarnings) {
	log = log.With().Str("component", "etcd").Logger()
	w := &etcdWarnings{log: log, window: etcdWarnWindow, now: time.Now, seen: map[string]*warnWindow{}}
	return zap.New(&zerologCore{log: log, stopping: stopping, warnings: w}), w
}

// zerologCore is a zapcore.Core writing to a zerolog logger. It is immutable;
// With returns a copy.
type zerologCore struct {
	log      zerolog.Logger
	fields   []zapcore.Field // from With, written before each entry's own fields
	stopping *atomic.Bool    // nil or false: normal levels
	warnings *etcdWarnings   // nil: every warning written
}

func (c *zerologCore) Enabled(l zapcore.Level) bool { return l >= etcdLogLevel }

func (c *zerologCore) With(fields []zapcore.Field) zapcore.Core {
	merged := make([]zapcore.Field, 0, len(c.fields)+len(fields))
	merged = append(merged, c.fields...)
	merged = append(merged, fields...)
	return &zerologCore{log: c.log, fields: merged, stopping: c.stopping, warnings: c.warnings}
}

func (c *zerologCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

// reservedKeys are the keys every line already has (or may have): an etcd
// field of that name is renamed so that no key is written twice.
var reservedKeys = map[string]bool{
	zerolog.LevelFieldName: true, zerolog.TimestampFieldName: true, zerolog.MessageFieldName: true,
	"component": true, "node": true, "logger": true, "stack": true,
}

func (c *zerologCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	// WithLevel, unlike Fatal() and Panic(), never exits or panics.
	level := zerologLevel(e.Level)
	if c.stopping != nil && c.stopping.Load() && level < zerolog.FatalLevel {
		level = zerolog.DebugLevel
	}
	if level == zerolog.WarnLevel && c.warnings != nil && !c.warnings.admit(e.Message) {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	for k, v := range enc.Fields {
		switch d, isDur := v.(time.Duration); {
		case reservedKeys[k]:
			delete(enc.Fields, k)
			enc.Fields["etcd_"+k] = v
		case isDur && !strings.HasSuffix(k, "_ms"):
			// etcd's durations ("took") say their unit, as ours do.
			delete(enc.Fields, k)
			enc.Fields[k+"_ms"] = float64(d) / float64(time.Millisecond)
		}
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

// etcdWarnings summarises repeated etcd warnings: the first of each message
// in a window is written, the rest counted until flush.
type etcdWarnings struct {
	log    zerolog.Logger
	window time.Duration
	now    func() time.Time

	mu   sync.Mutex
	seen map[string]*warnWindow // by message; guarded by mu
}

// warnWindow is one message's current window.
type warnWindow struct {
	start      time.Time
	suppressed int
}

// admit reports whether a warning with message msg is written now; if not,
// it is counted. A message whose window has ended is written again, after
// its summary.
func (w *etcdWarnings) admit(msg string) bool {
	now := w.now()
	w.mu.Lock()
	ww := w.seen[msg]
	if ww != nil && now.Sub(ww.start) < w.window {
		ww.suppressed++
		w.mu.Unlock()
		return false
	}
	var ended int
	if ww != nil {
		ended = ww.suppressed
	}
	w.seen[msg] = &warnWindow{start: now}
	w.mu.Unlock()
	w.summarise(msg, ended)
	return true
}

// flush writes the summary of every window ended by now, or of every
// window when all is set (at Close), and forgets them.
func (w *etcdWarnings) flush(all bool) {
	now := w.now()
	type ended struct {
		msg string
		n   int
	}
	var out []ended
	w.mu.Lock()
	for msg, ww := range w.seen {
		if all || now.Sub(ww.start) >= w.window {
			out = append(out, ended{msg, ww.suppressed})
			delete(w.seen, msg)
		}
	}
	w.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].msg < out[j].msg })
	for _, e := range out {
		w.summarise(e.msg, e.n)
	}
}

// summarise writes the count of a window's suppressed warnings, if any.
func (w *etcdWarnings) summarise(msg string, n int) {
	if n == 0 {
		return
	}
	noun := "warnings"
	if n == 1 {
		noun = "warning"
	}
	w.log.Warn().Str("warning", msg).Int("repeats", n).Int64("window_ms", w.window.Milliseconds()).
		Msg(fmt.Sprintf("etcd: %d more %s like %q in the last %s", n, noun, msg, w.window))
}

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
