package kafka

// CreateTopics (key 19): validate names, partition counts, replication
// factors and configs, then store each topic in etcd and open its partitions.

import (
	"context"
	"fmt"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleCreateTopics(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.CreateTopicsRequest)
	resp := newResponse(req).(*kmsg.CreateTopicsResponse)
	seen := make(map[string]int, len(r.Topics))
	for _, rt := range r.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range r.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		err := createTopicFromRequest(b, ctx, rt, seen[rt.Topic] > 1, r.ValidateOnly, &st)
		if err != nil {
			st.ErrorCode = node.ErrorCode(err)
			msg := err.Error()
			st.ErrorMessage = &msg
			resp.ThrottleMillis = max(resp.ThrottleMillis, node.ThrottleMillis(err))
			// A client's mistake is the client's to see (debug); a failure
			// of this broker's is the operator's.
			if st.ErrorCode == kerr.UnknownServerError.Code {
				b.Logger.Warn().Err(err).Str("topic", rt.Topic).Msg("create topic failed")
			} else if st.ErrorCode != kerr.TopicAlreadyExists.Code {
				b.Logger.Debug().Err(err).Str("topic", rt.Topic).Msg("create topic rejected")
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return done(resp), nil
}

func createTopicFromRequest(b *Server, ctx context.Context, rt kmsg.CreateTopicsRequestTopic, duplicate, validateOnly bool, st *kmsg.CreateTopicsResponseTopic) error {
	if duplicate {
		return fmt.Errorf("%w: topic %q is named more than once", node.ErrInvalidRequest, rt.Topic)
	}
	if len(rt.ReplicaAssignment) > 0 {
		return fmt.Errorf("%w: manual replica assignment is not supported", node.ErrInvalidRequest)
	}
	configs := make(map[string]string, len(rt.Configs))
	for _, c := range rt.Configs {
		if c.Value == nil {
			return node.InvalidConfig("config %s: null value", c.Name)
		}
		configs[c.Name] = *c.Value
	}
	t, err := b.CreateTopic(ctx, rt.Topic, rt.NumPartitions, rt.ReplicationFactor, configs, validateOnly)
	if err != nil {
		return err
	}
	st.TopicID = t.ID
	st.NumPartitions = t.Partitions
	st.ReplicationFactor = t.ReplicationFactor
	defaults := b.Cfg.TopicDefaults()
	for _, key := range node.TopicConfigKeys() {
		value, source := defaults.Enforced(t.Configs, t.ReplicationFactor, key)
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name = key
		c.Value = &value
		c.Source = int8(source)
		st.Configs = append(st.Configs, c)
	}
	return nil
}
