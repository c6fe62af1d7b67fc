package node

import (
	"context"
	"fmt"
)

// This file owns producer id allocation: ids come from etcd in blocks, so
// they are unique across brokers and restarts.

// producerIDBlock is how many ids one etcd transaction reserves.
const producerIDBlock = 1000

// NextProducerID returns a producer id no other producer has had.
func (b *Node) NextProducerID(ctx context.Context) (int64, error) {
	b.pidMu.Lock()
	defer b.pidMu.Unlock()
	if b.pidNext == b.pidEnd {
		first, err := b.Store.AllocateProducerIDs(ctx, producerIDBlock)
		if err != nil {
			return 0, fmt.Errorf("reserve producer ids: %w", err)
		}
		b.pidNext, b.pidEnd = first, first+producerIDBlock
	}
	id := b.pidNext
	b.pidNext++
	return id, nil
}
