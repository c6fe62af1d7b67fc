package records

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DuePrefix measures data, stored batches back to back as a fetch reads
// them, up to the first record that is not due at nowMs: it returns the
// length of the prefix of whole batches before the batch holding that
// record, and that record's due time (0 when every record is due). A
// record's due time is its header named header, a decimal unix time in ms;
// a record without one, or with one that is not a number, is due.
// A batch cut short at the end of data is kept: clients skip it, as they
// do any partial batch at the end of a fetch.
func DuePrefix(data []byte, nowMs int64, header string) (int, int64, error) {
	off := 0
	for len(data)-off >= 12 {
		n := 12 + int(binary.BigEndian.Uint32(data[off+8:]))
		if n > len(data)-off {
			break
		}
		var notDue int64
		err := Each(data[off:off+n], func(_, _ int64, rec *kmsg.Record) bool {
			if d, ok := dueOf(rec, header); ok && d > nowMs {
				notDue = d
				return false
			}
			return true
		})
		if err != nil {
			return off, 0, fmt.Errorf("records: due times of the batch at byte %d: %w", off, err)
		}
		if notDue != 0 {
			return off, notDue, nil
		}
		off += n
	}
	return len(data), 0, nil
}

// dueOf is rec's header named header read as a unix time in ms.
func dueOf(rec *kmsg.Record, header string) (int64, bool) {
	for _, h := range rec.Headers {
		if h.Key == header {
			ms, err := strconv.ParseInt(string(h.Value), 10, 64)
			return ms, err == nil
		}
	}
	return 0, false
}
