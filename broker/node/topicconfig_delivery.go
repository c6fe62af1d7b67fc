package node

// This file registers the delivery contract of issue 22 (queue/: the
// poison-message contract) among the topic configs: delivery.order,
// retry.backoff.ms, retry.jitter, retry.max.attempts, dead.letter.topic and
// retry.permanent.classes. queue.ValidateConfig is their one validator, so
// what a topic accepts is what the queue API parses (queue.ParseContract).
// DescribeConfigs and GET /v1/topics/{t} list them with every other key.

import "github.com/sluice-mq/sluice/queue"

// kindChecked is a string config whose check is its whole validation.
const kindChecked ConfigKind = 100

func init() {
	for key, def := range queue.Defaults {
		kind := kindChecked
		if key == queue.CfgMaxAttempts {
			kind = KindInt
		}
		key := key
		TopicConfigDefs[key] = configDef{Kind: kind, def: def, min: 1, Doc: queue.Docs[key],
			check: func(v string) error { return queue.ValidateConfig(key, v) }}
	}
}
