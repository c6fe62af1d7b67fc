package broker

// A transactional producer is refused at once with a non-retriable error that
// says why, instead of spinning on COORDINATOR_NOT_AVAILABLE (issue 7,
// item 18).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func TestTransactionalProducerRefusedPromptly(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	createTopic(t, testClient(t, b), "txn", 1, nil)
	cl := testClient(t, b, kgo.TransactionalID("x"), kgo.DefaultProduceTopic("txn"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := cl.BeginTransaction()
	if err == nil {
		err = cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr()
	}
	if ctx.Err() != nil {
		t.Fatalf("transactional produce was not refused before the deadline: %v", err)
	}
	if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("transactional produce: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
	}
}

func TestTransactionalRequestsRefused(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	ctx := context.Background()
	// pinned is a client that sends API key at exactly version v (franz-go
	// picks the highest version both sides support, not req.Version).
	pinned := func(key, v int16) *kgo.Client {
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(key, v)
		return testClient(t, b, kgo.MaxVersions(vs))
	}
	const wantMsg = "transactions are not supported"
	for v := int16(1); v <= 5; v++ {
		t.Run(fmt.Sprintf("FindCoordinator v%d", v), func(t *testing.T) {
			cl := pinned(kmsg.FindCoordinator.Int16(), v)
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorType = 1 /* transaction coordinator */
			req.CoordinatorKey, req.CoordinatorKeys = "x", []string{"x"}
			resp, err := cl.Broker(int(b.Cfg.NodeID)).RetriableRequest(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetVersion() != v {
				t.Fatalf("sent v%d, want v%d", resp.GetVersion(), v)
			}
			fr := resp.(*kmsg.FindCoordinatorResponse)
			code, msg, node := fr.ErrorCode, fr.ErrorMessage, fr.NodeID
			if v >= 4 {
				if len(fr.Coordinators) != 1 {
					t.Fatalf("%d coordinators, want 1", len(fr.Coordinators))
				}
				c := fr.Coordinators[0]
				code, msg, node = c.ErrorCode, c.ErrorMessage, c.NodeID
			}
			if code != kerr.TransactionalIDAuthorizationFailed.Code || node != -1 {
				t.Errorf("error code %d node %d, want %d node -1", code, node, kerr.TransactionalIDAuthorizationFailed.Code)
			}
			if msg == nil || !strings.Contains(*msg, wantMsg) {
				t.Errorf("error message %v, want one containing %q", msg, wantMsg)
			}
		})
	}
	for v := int16(0); v <= 4; v++ {
		t.Run(fmt.Sprintf("InitProducerId v%d", v), func(t *testing.T) {
			cl := pinned(kmsg.InitProducerID.Int16(), v)
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID = kmsg.StringPtr("x")
			req.TransactionTimeoutMillis = 60000
			resp, err := cl.Broker(int(b.Cfg.NodeID)).RetriableRequest(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetVersion() != v {
				t.Fatalf("sent v%d, want v%d", resp.GetVersion(), v)
			}
			ir := resp.(*kmsg.InitProducerIDResponse)
			if ir.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code || ir.ProducerID != -1 {
				t.Errorf("error code %d producer id %d, want %d and -1", ir.ErrorCode, ir.ProducerID, kerr.TransactionalIDAuthorizationFailed.Code)
			}
		})
	}
}
