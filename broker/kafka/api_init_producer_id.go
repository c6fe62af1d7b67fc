package kafka

// InitProducerId (key 22): a fresh producer id (epoch 0) for an idempotent
// producer. Ids come from etcd in blocks, so they are unique across brokers
// and restarts. Transactions are not supported: a transactional id is
// refused with node.ErrTransactionsUnsupported (the response has no error message
// field in any version; FindCoordinator, which clients send first, carries it).

import (
	"context"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleInitProducerID(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.InitProducerIDRequest)
	resp := newResponse(req).(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if r.TransactionalID != nil {
		resp.ErrorCode = node.ErrorCode(node.ErrTransactionsUnsupported)
		b.Logger.Debug().Str("transactional_id", *r.TransactionalID).Msg("refused InitProducerId: transactions are not supported")
		return done(resp), nil
	}
	id, err := b.NextProducerID(ctx)
	if err != nil {
		b.Logger.Error().Err(err).Msg("allocate producer id")
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return done(resp), nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return done(resp), nil
}
