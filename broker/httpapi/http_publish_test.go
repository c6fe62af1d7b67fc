package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/meta"
)

// FuzzPublishRequest: arbitrary bodies for the publish endpoint must be
// refused or turned into valid batches, never panic.
func FuzzPublishRequest(f *testing.F) {
	f.Add([]byte(`{"messages":[{"message_key":"k","payload":"v","headers":{"a":"b"}}]}`))
	f.Add([]byte(`{"producer_id":1,"producer_epoch":0,"messages":[{"payload_base64":"AAE=","sequence":0,"partition":1}]}`))
	f.Add([]byte(`{"messages":[{"timestamp_ms":-1}]}`))
	b := &Server{Node: &node.Node{}}
	tp := &node.Topic{States: make([]meta.PartitionState, 3), Partitions: make([]*partition.Partition, 3), Settings: node.ParseSettings(nil)}
	tp.Meta.Name = "fuzz"
	f.Fuzz(func(t *testing.T, body []byte) {
		var req PublishRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return
		}
		batches, err := b.buildPublishBatches(tp, &req)
		if err != nil {
			return
		}
		for _, pb := range batches {
			if _, err := node.ValidateBatch(pb.raw, 1<<30); err != nil {
				t.Fatalf("built an invalid batch: %v", err)
			}
			if pb.partition < 0 || pb.partition >= 3 {
				t.Fatalf("partition %d of 3", pb.partition)
			}
		}
	})
}
