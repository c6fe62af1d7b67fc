package records

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// dueBatch is a stored batch at base of records with the given due times
// (-1: no header).
func dueBatch(base int64, dues ...int64) []byte {
	var recs []byte
	for i, d := range dues {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte("v")}
		if d >= 0 {
			r.Headers = []kmsg.Header{{Key: "due", Value: []byte(strconv.FormatInt(d, 10))}}
		}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	rb := kmsg.RecordBatch{FirstOffset: base, Magic: 2, NumRecords: int32(len(dues)), Records: recs,
		LastOffsetDelta: int32(len(dues) - 1), ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1}
	raw := rb.AppendTo(nil)
	raw[8], raw[9], raw[10], raw[11] = byte((len(raw)-12)>>24), byte((len(raw)-12)>>16), byte((len(raw)-12)>>8), byte(len(raw)-12)
	return raw
}

func TestDuePrefix(t *testing.T) {
	a := dueBatch(0, 100, -1)  // due, no due time
	b := dueBatch(2, 150, 300) // its second record is not due at 200
	c := dueBatch(4, 50)       // due, but behind b
	data := append(append(append([]byte{}, a...), b...), c...)
	for _, tc := range []struct {
		name     string
		data     []byte
		now      int64
		wantN    int
		wantNext int64
	}{
		{"all due", data, 1000, len(data), 0},
		{"stops at the batch holding the first not due", data, 200, len(a), 300},
		{"nothing due", data, 10, 0, 100},
		{"a partial batch at the end is kept", append(append([]byte{}, a...), b[:20]...), 200, len(a) + 20, 0},
		{"empty", nil, 0, 0, 0},
	} {
		n, next, err := DuePrefix(tc.data, tc.now, "due")
		if err != nil || n != tc.wantN || next != tc.wantNext {
			t.Errorf("%s: DuePrefix = %d, %d, %v; want %d, %d", tc.name, n, next, err, tc.wantN, tc.wantNext)
		}
	}
	bad := append([]byte{}, a...)
	bad[61] = 0x7e // the first record's length (zigzag 63): past the batch's end
	if _, _, err := DuePrefix(append(bad, b...), 200, "due"); err == nil {
		t.Error("a batch whose record runs past its end was measured without an error")
	}
}
