package node

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDeliveryTopicConfigs(t *testing.T) {
	tests := []struct {
		key, value string
		wantErr    string
	}{
		{"delivery.order", "per-key-strict", ""},
		{"delivery.order", "fifo", "is not one of"},
		{"retry.backoff.ms", "200,400", ""},
		{"retry.backoff.ms", "200,-1", "tier 1"},
		{"retry.jitter", "0.1", ""},
		{"retry.jitter", "3", "fraction"},
		{"retry.max.attempts", "3", ""},
		{"retry.max.attempts", "0", "[1, 100]"},
		{"retry.max.attempts", "1000", "[1, 100]"},
		{"retry.max.attempts", "x", "not an integer"},
		{"dead.letter.topic", "orders.dead", ""},
		{"dead.letter.topic", "bad name", "has ' '"},
		{"retry.permanent.classes", "fatal,schema", ""},
		{"retry.permanent.classes", "transient", "cannot be permanent"},
		{"visibility.timeout.ms", "30000", ""},
		{"visibility.timeout.ms", "0", ""},
		{"visibility.timeout.ms", "-1", "[0, 43200000]"},
	}
	for _, tt := range tests {
		err := validateTopicConfigs(map[string]string{tt.key: tt.value})
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s=%q refused: %v", tt.key, tt.value, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || ErrorCode(err) != kerr.InvalidConfig.Code):
			t.Errorf("%s=%q: %v (code %d), want INVALID_CONFIG containing %q", tt.key, tt.value, err, ErrorCode(err), tt.wantErr)
		}
	}
	// DescribeConfigs lists them with their defaults and documentation.
	got := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range DescribeTopicConfigs(map[string]string{"retry.jitter": "0.5"}, 3, nil, nil, true) {
		got[c.Name] = c
	}
	want := map[string]string{"delivery.order": "relaxed", "retry.backoff.ms": "10000,60000,600000", "retry.jitter": "0.5",
		"retry.max.attempts": "4", "dead.letter.topic": "", "retry.permanent.classes": "permanent"}
	for k, v := range want {
		c, ok := got[k]
		if !ok || c.Value == nil || *c.Value != v || c.Documentation == nil || *c.Documentation == "" {
			t.Errorf("%s: %+v, want value %q with a doc", k, c, v)
		}
	}
	if got["retry.jitter"].IsDefault || !got["delivery.order"].IsDefault {
		t.Error("default flags wrong")
	}
}
