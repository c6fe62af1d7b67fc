package kafka

// FindCoordinator (key 10): names the broker that coordinates each group,
// by the placement of group_placement.go over the live brokers (this
// broker, when it is alone). v4+ asks for a batch of keys. Transactions are not served: transaction
// keys answer node.ErrTransactionsUnsupported, a non-retriable code with a message
// that says so; other key types INVALID_REQUEST.

import (
	"context"
	"net"
	"strconv"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	coordinatorKeyGroup       = 0
	coordinatorKeyTransaction = 1
)

func handleFindCoordinator(b *Server, _ context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.FindCoordinatorRequest)
	resp := newResponse(req).(*kmsg.FindCoordinatorResponse)
	answer := func(key string) kmsg.FindCoordinatorResponseCoordinator {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.NodeID, c.Host, c.Port = -1, "", -1
		switch {
		case r.CoordinatorType == coordinatorKeyTransaction:
			c.ErrorCode = node.ErrorCode(node.ErrTransactionsUnsupported)
			c.ErrorMessage = kmsg.StringPtr(node.ErrTransactionsUnsupported.Error())
		case r.CoordinatorType != coordinatorKeyGroup:
			c.ErrorCode = node.ErrorCode(node.ErrCoordinatorKeyType)
		default:
			co := b.GroupCoordinator(key)
			if host, port := hostPort(b.listenerAddress(co.NodeID, co.Kafka, co.Listeners, req.listener)); port > 0 {
				c.NodeID, c.Host, c.Port = co.NodeID, host, port
			} else {
				c.ErrorCode = node.ErrorCode(node.ErrCoordinatorUnavailable)
			}
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

// hostPort splits a broker's advertised Kafka address for FindCoordinator.
func hostPort(addr string) (string, int32) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", -1
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return "", -1
	}
	return host, int32(port)
}
