package meta

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestEtcdLoggerForwardsWarnDropsInfo(t *testing.T) {
	var buf strings.Builder
	zl, _ := newEtcdLogger(zerolog.New(&buf), nil)
	lg := zl.With(zap.String("member", "1"))

	lg.Debug("debug line")
	lg.Info("info line", zap.Int("n", 1))
	lg.Warn("slow fdatasync", zap.Duration("took", 0), zap.String("path", "/x"))
	lg.Error("lost leader", zap.Int64("term", 7))

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2 (warn, error): %q", len(lines), buf.String())
	}
	want := []struct {
		level, msg, key string
		value           any
	}{
		{"warn", "slow fdatasync", "path", "/x"},
		{"error", "lost leader", "term", float64(7)},
	}
	for i, w := range want {
		var got map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("line %d %q: %v", i, lines[i], err)
		}
		if got["level"] != w.level || got["message"] != w.msg || got["component"] != "etcd" ||
			got["member"] != "1" || got[w.key] != w.value {
			t.Errorf("line %d = %v, want level %s message %q component etcd member 1 %s=%v",
				i, got, w.level, w.msg, w.key, w.value)
		}
	}
}

func TestZerologLevel(t *testing.T) {
	tests := []struct {
		in   zapcore.Level
		want zerolog.Level
	}{
		{zapcore.DebugLevel, zerolog.DebugLevel},
		{zapcore.InfoLevel, zerolog.InfoLevel},
		{zapcore.WarnLevel, zerolog.WarnLevel},
		{zapcore.ErrorLevel, zerolog.ErrorLevel},
		{zapcore.DPanicLevel, zerolog.PanicLevel},
		{zapcore.PanicLevel, zerolog.PanicLevel},
		{zapcore.FatalLevel, zerolog.FatalLevel},
	}
	for _, tt := range tests {
		t.Run(tt.in.String(), func(t *testing.T) {
			if got := zerologLevel(tt.in); got != tt.want {
				t.Errorf("zerologLevel(%v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestEtcdLoggerQuietWhileStopping(t *testing.T) {
	var buf bytes.Buffer
	var stopping atomic.Bool
	lg, _ := newEtcdLogger(zerolog.New(&buf).Level(zerolog.InfoLevel), &stopping)
	lg.Error("serving failed before stop")
	if !strings.Contains(buf.String(), "serving failed before stop") {
		t.Fatalf("an error before stopping was dropped: %q", buf.String())
	}
	buf.Reset()
	stopping.Store(true)
	lg.Error("use of closed network connection")
	if buf.Len() != 0 {
		t.Fatalf("an error while stopping was logged above debug: %q", buf.String())
	}
}

// A peer outage makes etcd repeat the same warnings on every retry: each
// message is written once per window, the repeats counted in one line when
// the window ends; errors are never summarised.
func TestEtcdLoggerSummarisesRepeatedWarnings(t *testing.T) {
	var buf strings.Builder
	lg, w := newEtcdLogger(zerolog.New(&buf), nil)
	now := time.Unix(1000, 0)
	w.now = func() time.Time { return now }

	// An outage of one window: etcd's prober and dialer warn every second.
	for range 30 {
		lg.Warn("prober detected unhealthy status", zap.String("remote-peer-id", "2"))
		lg.Warn("failed to reach the peer URL")
		lg.Error("lost leader")
		now = now.Add(time.Second)
	}
	w.flush(false)
	lines := decodeLines(t, buf.String())
	counts := map[string]int{}
	var summaries []map[string]any
	for _, l := range lines {
		if l["repeats"] != nil {
			summaries = append(summaries, l)
			continue
		}
		counts[l["message"].(string)]++
	}
	if counts["prober detected unhealthy status"] != 1 || counts["failed to reach the peer URL"] != 1 {
		t.Errorf("each repeated warning should be written once per window: %v", counts)
	}
	if counts["lost leader"] != 30 {
		t.Errorf("errors must all be written: %d of 30", counts["lost leader"])
	}
	if len(summaries) != 2 {
		t.Fatalf("want one summary per repeated warning, got %d: %v", len(summaries), summaries)
	}
	for _, s := range summaries {
		if s["repeats"] != float64(29) || s["level"] != "warn" || s["window_ms"] != float64(30_000) {
			t.Errorf("summary %v: want 29 repeats at warn over 30000 ms", s)
		}
	}

	// After the window the next one is written in full again.
	buf.Reset()
	lg.Warn("failed to reach the peer URL")
	lg.Warn("failed to reach the peer URL")
	w.flush(true)
	lines = decodeLines(t, buf.String())
	if len(lines) != 2 || lines[0]["message"] != "failed to reach the peer URL" || lines[1]["repeats"] != float64(1) {
		t.Errorf("after a window: want the warning then a summary of 1 at close, got %v", lines)
	}
}

// An etcd field named like a key the line already has is renamed, so no
// JSON key repeats; a duration's key says its unit.
func TestEtcdLoggerRenamesReservedAndDurationKeys(t *testing.T) {
	var buf strings.Builder
	lg, _ := newEtcdLogger(zerolog.New(&buf).With().Int("node", 1).Logger(), nil)
	lg.Warn("w", zap.String("component", "raft"), zap.String("message", "m"), zap.Int("node", 2))
	line := strings.TrimSpace(buf.String())
	for _, k := range []string{`"component"`, `"message"`, `"node"`} {
		if n := strings.Count(line, k+":"); n != 1 {
			t.Errorf("key %s written %d times: %s", k, n, line)
		}
	}
	if !strings.Contains(line, `"etcd_component":"raft"`) {
		t.Errorf("renamed field missing: %s", line)
	}
	buf.Reset()
	lg.Warn("slow", zap.Duration("took", 1500*time.Microsecond))
	if line := buf.String(); !strings.Contains(line, `"took_ms":1.5`) {
		t.Errorf("renamed field missing: %s", line)
	}
}

func decodeLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}
