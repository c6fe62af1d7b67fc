package kafka

// CreatePartitions (key 37): grow a topic's partition count.

import (
	"context"
	"fmt"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleCreatePartitions(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.CreatePartitionsRequest)
	resp := newResponse(req).(*kmsg.CreatePartitionsResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		var err error
		if len(rt.Assignment) > 0 {
			err = fmt.Errorf("%w: manual replica assignment is not supported", node.ErrInvalidRequest)
		} else {
			err = b.AddPartitions(ctx, rt.Topic, rt.Count, r.ValidateOnly)
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
