package broker

// Retention settings of value 0 through the Kafka admin API, down to the
// maintenance tick deleting sealed segments (issue 7, item 13).

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// waitStartOffset polls the log start offset of topic-0 until it is want or
// the deadline passes.
func waitStartOffset(t *testing.T, adm *kadm.Client, topic string, want int64, within time.Duration) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var got int64 = -1
	for {
		starts, err := adm.ListStartOffsets(context.Background(), topic)
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := starts.Lookup(topic, 0); ok && o.Err == nil {
			got = o.Offset
			if got == want {
				return
			}
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%s-0: log start offset %d after %v, want %d", topic, got, within, want)
		}
	}
}

func TestRetentionZeroDeletesSealedSegments(t *testing.T) {
	tests := []struct {
		name  string
		key   string
		alter bool // set through AlterConfigs after creation instead of CreateTopics
	}{
		{"bytes at create", "retention.bytes", false},
		{"bytes by alter", "retention.bytes", true},
		{"ms at create", "retention.ms", false},
		{"ms by alter", "retention.ms", true},
	}
	b := startBroker(t, testBrokerConfig(t))
	cl := testClient(t, b, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := "ret0-" + string(rune('a'+i))
			// 1 KiB segments hold two of the ~470-byte batches below.
			configs := map[string]*string{"segment.bytes": kadm.StringPtr("1024")}
			if !tt.alter {
				configs[tt.key] = kadm.StringPtr("0")
			}
			if _, err := adm.CreateTopic(ctx, 1, 1, configs, topic); err != nil {
				t.Fatal(err)
			}
			if tt.alter {
				resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: tt.key, Value: kadm.StringPtr("0")}}, topic)
				if err != nil || resp[0].Err != nil {
					t.Fatalf("alter %s=0: %v %v", tt.key, err, resp[0].Err)
				}
			}
			if c := describeConfig(t, adm, topic, tt.key); c.MaybeValue() != "0" || c.Source != 1 {
				t.Fatalf("%s after setting it to 0: %+v", tt.key, c)
			}
			// Six batches, one per ProduceSync: segments [0,1] [2,3] sealed, [4,5] active.
			for n := 0; n < 6; n++ {
				rec := &kgo.Record{Topic: topic, Value: make([]byte, 400)}
				if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			// The maintenance tick (100ms in tests) deletes both sealed segments
			// and never the active one.
			waitStartOffset(t, adm, topic, 4, 10*time.Second)
		})
	}
}
