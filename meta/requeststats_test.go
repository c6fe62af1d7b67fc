package meta

// The embedded etcd's slow-request warning (issue 7, item 16): etcd's default
// threshold, so quick requests do not each log a "request stats" warning.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

func TestEmbedConfigWarnsOnlyAtEtcdDefaults(t *testing.T) {
	ec, err := embedConfig(embeddedConfig(t).withDefaults(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if ec.WarningUnaryRequestDuration != embed.DefaultWarningUnaryRequestDuration {
		t.Errorf("WarningUnaryRequestDuration = %v, want etcd's default %v", ec.WarningUnaryRequestDuration, embed.DefaultWarningUnaryRequestDuration)
	}
	if ec.WarningApplyDuration != embed.DefaultWarningApplyDuration {
		t.Errorf("WarningApplyDuration = %v, want etcd's default %v", ec.WarningApplyDuration, embed.DefaultWarningApplyDuration)
	}
}

func TestQuickRequestsLogNoRequestStats(t *testing.T) {
	var buf syncBuffer
	s, err := Open(testContext(t), embeddedConfig(t), zerolog.New(&buf))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	ctx := testContext(t)
	for i := range 50 {
		key := fmt.Sprintf("%stest/stats/%d", s.Prefix(), i)
		if _, err := s.Client().Put(ctx, key, "v"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Client().Get(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// A request that really took longer than etcd's threshold (a loaded test
	// machine) may be reported; a quick one must not be.
	flagged := 0
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if !strings.Contains(line, `"request stats"`) {
			continue
		}
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		spent, ok := entry["time spent"].(float64) // zerolog writes durations in milliseconds
		if !ok || time.Duration(spent*float64(time.Millisecond)) <= embed.DefaultWarningUnaryRequestDuration {
			flagged++
			if flagged <= 3 {
				t.Errorf("quick request logged as slow: %s", line)
			}
		}
	}
	if flagged > 3 {
		t.Errorf("... and %d more quick requests logged as slow", flagged-3)
	}
}
