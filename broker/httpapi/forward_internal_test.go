package httpapi

import (
	"testing"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzSplitBatches feeds the internal batches call's body splitter
// arbitrary bytes: it never panics, and what it accepts covers the body
// exactly, batch after batch.
func FuzzSplitBatches(f *testing.F) {
	recs := []kmsg.Record{{Value: []byte("a")}, {Value: []byte("bc")}}
	one := node.EncodeBatch(recs, []int{0, 1}, 7, 0, 0)
	f.Add(one)
	f.Add(append(append([]byte{}, one...), one...))
	f.Add(one[:len(one)-1])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		pbs, err := splitBatches(body, 3)
		if err != nil {
			return
		}
		n := 0
		for _, pb := range pbs {
			if pb.partition != 3 || len(pb.raw) == 0 {
				t.Fatalf("batch %+v", pb)
			}
			n += len(pb.raw)
		}
		if n != len(body) {
			t.Fatalf("batches cover %d of %d bytes", n, len(body))
		}
	})
}
