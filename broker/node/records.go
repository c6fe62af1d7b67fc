package node

// This file owns the broker's questions about the records inside a stored
// batch (timestamp lookups for ListOffsets, lag, HTTP fetches); the
// decoding itself is broker/records'.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/records"
)

// EachRecord calls fn with the offset and timestamp of every record of a
// stored batch, in order, until fn returns false (records.Each).
func EachRecord(batch []byte, fn func(offset, timestamp int64, rec *kmsg.Record) bool) error {
	return records.Each(batch, fn)
}

// FirstOffsetAtOrAfter returns the offset and timestamp of the first record
// in batch at or above offset from whose timestamp is at least ts (from is
// the log start: a batch may straddle it after DeleteRecords).
func FirstOffsetAtOrAfter(batch []byte, ts, from int64) (offset, recordTS int64, found bool, err error) {
	err = EachRecord(batch, func(off, recTS int64, _ *kmsg.Record) bool {
		if recTS >= ts && off >= from {
			offset, recordTS, found = off, recTS, true
			return false
		}
		return true
	})
	return offset, recordTS, found, err
}
