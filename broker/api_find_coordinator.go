package broker

// FindCoordinator (key 10): this broker coordinates every consumer group.
// v4+ asks for a batch of keys. Transactions are not served: transaction
// keys answer errTransactionsUnsupported, a non-retriable code with a message
// that says so; other key types INVALID_REQUEST.

import (
	"context"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	coordinatorKeyGroup       = 0
	coordinatorKeyTransaction = 1
)

func handleFindCoordinator(b *Broker, _ context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.FindCoordinatorRequest)
	resp := newResponse(req).(*kmsg.FindCoordinatorResponse)
	host, portStr, _ := net.SplitHostPort(b.advertise)
	port, _ := strconv.Atoi(portStr)
	answer := func(key string) kmsg.FindCoordinatorResponseCoordinator {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.NodeID, c.Host, c.Port = -1, "", -1
		switch {
		case r.CoordinatorType == coordinatorKeyTransaction:
			c.ErrorCode = errorCode(errTransactionsUnsupported)
			c.ErrorMessage = kmsg.StringPtr(errTransactionsUnsupported.Error())
		case r.CoordinatorType != coordinatorKeyGroup:
			c.ErrorCode = errorCode(errCoordinatorKeyType)
		default:
			c.NodeID, c.Host, c.Port = b.cfg.NodeID, host, int32(port)
		}
		return c
	}
	if req.version >= 4 {
		for _, key := range r.CoordinatorKeys {
			resp.Coordinators = append(resp.Coordinators, answer(key))
		}
		return done(resp), nil
	}
	c := answer(r.CoordinatorKey)
	resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
	resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
	return done(resp), nil
}
