package loadgen

// This file owns the consumers' fetch latency (Kafka): every Fetch
// request's round trip, from the start of its write to the last byte of
// its answer (franz-go's BrokerE2E), long polls included, so a reader
// that waits on a broker busy with another tenant shows it. Consumers
// fetch with a 500 ms max wait: a tail reader with nothing new to read
// records up to that.

import (
	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchKey is the Kafka API key of Fetch.
const fetchKey = 1

// fetchHook records Fetch round trips into h.
type fetchHook struct{ h *Histogram }

var _ kgo.HookBrokerE2E = fetchHook{}

func (f fetchHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key == fetchKey && e2e.Err() == nil {
		f.h.Record(e2e.DurationE2E())
	}
}

// topicConfigs is a topic's configs as kadm takes them (nil for none).
func topicConfigs(m map[string]string) map[string]*string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]*string, len(m))
	for k, v := range m {
		out[k] = &v
	}
	return out
}
