package meta

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestEtcdLoggerForwardsWarnDropsInfo(t *testing.T) {
	var buf strings.Builder
	lg := newEtcdLogger(zerolog.New(&buf), nil).With(zap.String("member", "1"))

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
	lg := newEtcdLogger(zerolog.New(&buf).Level(zerolog.InfoLevel), &stopping)
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
