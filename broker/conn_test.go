package broker

import (
	"context"
	"encoding/binary"
	"io"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConnectionDropsLargeReplyBuffer: a connection that answered a large
// fetch and stays open does not pin a buffer the size of that reply.
func TestConnectionDropsLargeReplyBuffer(t *testing.T) {
	const total = 24 << 20
	b := startBroker(t, testBrokerConfig(t))
	cl := testClient(t, b, kgo.DefaultProduceTopic("big"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	createTopic(t, cl, "big", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	value := make([]byte, 256<<10)
	for i := range total / len(value) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}

	c := dialRaw(t, b, "")
	c.apiVersions()
	before := heapInuse()
	req := fetchReq(b, "big", 0, 0, 0, 2*total, 2*total)
	req.SetVersion(12)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.SetVersion(12)
	c.roundTrip(req, resp)
	if n := len(resp.Topics[0].Partitions[0].RecordBatches); n < total {
		t.Fatalf("the fetch returned %d bytes, want at least %d", n, total)
	}
	resp = nil
	c.apiVersions() // the connection is open and has answered since
	after := heapInuse()
	t.Logf("heap in use %d MiB before the fetch, %d MiB after it", before>>20, after>>20)
	if after > before+total/2 {
		t.Fatalf("heap in use grew by %d MiB after a %d MiB fetch on an open connection", (after-before)>>20, total>>20)
	}
}

// TestAcksZeroProduce: an acks=0 produce gets no reply (the next request's
// reply comes first), its batch is appended, and its request memory is
// released once it is.
func TestAcksZeroProduce(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	createTopic(t, testClient(t, b), "fire", 1, nil)
	c := dialRaw(t, b, "")
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks, req.TimeoutMillis = 0, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "fire"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = brokertest.Batch(3, -1, -1, -1, time.Now().UnixMilli())
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if _, err := c.nc.Write(brokertest.EncodeRequest(req, 1)); err != nil {
		t.Fatal(err)
	}
	av := kmsg.NewPtrApiVersionsRequest()
	avResp := kmsg.NewPtrApiVersionsResponse()
	if _, err := c.nc.Write(brokertest.EncodeRequest(av, 2)); err != nil {
		t.Fatal(err)
	}
	var head [8]byte
	if err := c.nc.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c.nc, head[:]); err != nil {
		t.Fatal(err)
	}
	if corr := binary.BigEndian.Uint32(head[4:]); corr != 2 {
		t.Fatalf("first reply has correlation id %d; the acks=0 produce (1) must not be answered", corr)
	}
	rest := make([]byte, binary.BigEndian.Uint32(head[:4])-4)
	if _, err := io.ReadFull(c.nc, rest); err != nil {
		t.Fatal(err)
	}
	if err := avResp.ReadFrom(rest); err != nil {
		t.Fatal(err)
	}
	p := b.LookupTopic("fire").Partitions[0]
	brokertest.Eventually(t, 30*time.Second, "the acks=0 batch appended and its memory released", func() bool {
		hw, _ := p.HighWatermark()
		return hw == 3 && metricValue(t, b, "sluice_request_memory_bytes") == 0
	})
}
