package main

// records.go owns handing on the records inside stored batches (decoded by
// broker/records, as the broker decodes them), skipping control batches. It
// also walks a partition's batches over an offset range, from the local
// log where it holds them and from object storage below it.
//
// Invariant: a batch's records are handed on only after its CRC checked
// out; control batches (transaction markers, a leader's epoch-start batch)
// are skipped, as a consumer skips them.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/records"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier"
	"github.com/sluice-mq/sluice/tier/object"
	"github.com/sluice-mq/sluice/wal"
)

// The control bit of a batch's attributes (Kafka's), and where they are.
const (
	attrControl = 0x20
	attrOffset  = 21
)

// record is one decoded record.
type record struct {
	Offset    int64
	Timestamp int64 // ms since the epoch
	Key       []byte
	Value     []byte
	Headers   []kmsg.Header
}

// eachRecord calls fn with every record of a stored batch, in order, until
// fn returns false. Control batches have no records for it.
func eachRecord(batch []byte, fn func(r record) bool) error {
	if err := wal.CheckCRC(batch); err != nil {
		return err
	}
	if len(batch) > attrOffset+1 && int16(binary.BigEndian.Uint16(batch[attrOffset:]))&attrControl != 0 {
		return nil
	}
	return records.Each(batch, func(off, ts int64, rec *kmsg.Record) bool {
		return fn(record{Offset: off, Timestamp: ts, Key: rec.Key, Value: rec.Value, Headers: rec.Headers})
	})
}

// errEnough ends a walk that has what it wanted.
var errEnough = errors.New("enough")

// localReadBytes is how much one local log read takes.
const localReadBytes = 1 << 20

// eachBatch calls fn with every batch of t holding offsets in [from, to), in
// order: from the local log l (nil: none) where it holds them, otherwise
// from object storage. fn's errEnough ends the walk with nil. An offset that
// neither holds is an error naming both ranges.
func (e *env) eachBatch(ctx context.Context, t target, l *localLog, from, to wal.Offset, fn func(batch []byte) error) error {
	var objs []meta.RemoteObject
	next := from
	walk := func(batch []byte) error {
		h, err := wal.ParseBatchHeader(batch)
		if err != nil {
			return err
		}
		if h.BaseOffset >= to {
			return errEnough
		}
		if err := fn(batch); err != nil {
			return err
		}
		next = h.LastOffset() + 1
		return nil
	}
	for next < to {
		before := next
		var err error
		switch {
		case l != nil && next >= l.log.StartOffset() && next < l.log.EndOffset():
			var data []byte
			if data, err = l.log.Read(next, to, localReadBytes); err == nil {
				err = object.Batches(data, walk)
			}
		case next >= wal.Offset(t.head.LogStart) && next < wal.Offset(t.head.RemoteEnd) && e.store != nil:
			if objs == nil {
				if objs, err = tier.ListObjects(ctx, e.store, t.head); err != nil {
					return err
				}
			}
			err = tier.RemoteBatches(ctx, e.store, objs, next, func(b []byte) error {
				if l != nil && next >= l.log.StartOffset() && next < l.log.EndOffset() {
					return tier.ErrStop // the local log takes over
				}
				return walk(b)
			})
		default:
			return fmt.Errorf("%s: offset %d is in neither the remote log [%d, %d) nor the local one %s",
				t, next, t.head.LogStart, t.head.RemoteEnd, localRange(l))
		}
		if errors.Is(err, errEnough) {
			return nil
		}
		if err != nil {
			return err
		}
		if next == before {
			return fmt.Errorf("%s: no batch holds offset %d", t, next)
		}
	}
	return nil
}

func localRange(l *localLog) string {
	if l == nil {
		return "(no --data-dir or no local log)"
	}
	return fmt.Sprintf("[%d, %d)", l.log.StartOffset(), l.log.EndOffset())
}
