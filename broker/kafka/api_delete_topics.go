package kafka

// DeleteTopics (key 20): remove topics by name (v0-5) or by name or topic
// ID (v6+), including their local logs.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
)

func handleDeleteTopics(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.DeleteTopicsRequest)
	resp := newResponse(req).(*kmsg.DeleteTopicsResponse)
	targets := r.Topics
	for _, name := range r.TopicNames {
		targets = append(targets, kmsg.DeleteTopicsRequestTopic{Topic: kmsg.StringPtr(name)})
	}
	for _, rt := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic = rt.Topic
		st.TopicID = rt.TopicID
		name := ""
		if rt.Topic != nil {
			name = *rt.Topic
		} else if t := b.LookupTopicID(rt.TopicID); t != nil {
			name = t.Meta.Name
			st.Topic = &name
		}
		var err error
		if name == "" {
			err = fmt.Errorf("topic id %s: %w", node.UUIDString(rt.TopicID), meta.ErrTopicNotFound)
		} else {
			var t meta.Topic
			t, err = b.DeleteTopic(ctx, name)
			st.TopicID = t.ID
		}
		if err != nil {
			st.ErrorCode = node.ErrorCode(err)
			msg := err.Error()
			st.ErrorMessage = &msg
			resp.ThrottleMillis = max(resp.ThrottleMillis, node.ThrottleMillis(err))
		}
		resp.Topics = append(resp.Topics, st)
	}
	return done(resp), nil
}
