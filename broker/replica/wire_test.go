package replica

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/wal"
)

// A leader core's answers survive the wire as the follower's core must
// read them; an unjudged partition is left out and read as Unjudged.
func TestFetchAnswerRoundTrip(t *testing.T) {
	fetch := Message{Type: MsgFetch, From: 2, To: 1, Epoch: 4, Seq: 9, Offset: 150, LastEpoch: 1}
	data := Batch{Base: 150, Last: 152, Epoch: 4, Data: []byte("abc")}
	for _, tc := range []struct {
		name string
		a    *Message
		want Message // Type, From, To, Seq and the echo are checked apart
	}{
		{"unjudged", nil, Message{Unjudged: true}},
		{"diverging", &Message{HW: 90, Diverging: true, DivergingEpoch: 1, DivergingEnd: 100},
			Message{HW: 90, Diverging: true, DivergingEpoch: 1, DivergingEnd: 100, ReadFrom: 150}},
		{"fenced", &Message{Err: ErrCodeFencedLeaderEpoch}, Message{Err: ErrCodeFencedLeaderEpoch, ReadFrom: 150}},
		{"unknown epoch", &Message{Err: ErrCodeUnknownLeaderEpoch}, Message{Err: ErrCodeUnknownLeaderEpoch, ReadFrom: 150}},
		{"not leader", &Message{Err: ErrCodeNotLeader}, Message{Err: ErrCodeNotLeader, ReadFrom: 150}},
		{"held, judged", &Message{HW: 120, ReadFrom: 150, ReadTo: 150}, Message{HW: 120, ReadFrom: 150, ReadTo: 150}},
		{"records", &Message{HW: 120, ReadFrom: 150, ReadTo: 153, Batches: []Batch{data}},
			Message{HW: 120, ReadFrom: 150, ReadTo: 153, Batches: []Batch{data}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.HighWatermark = 777 // the edge's own view, which an answer replaces
			include, read := EncodeFetchAnswer(tc.a, &sp)
			if read {
				for _, b := range tc.a.Batches {
					sp.RecordBatches = append(sp.RecordBatches, simBatchBytes(b)...)
				}
			}
			var got Message
			if include {
				got = DecodeFetchAnswer(fetch, &sp)
			} else {
				got = UnjudgedAnswer(fetch)
			}
			if got.Type != MsgFetchResp || got.From != 1 || got.To != 2 || got.Seq != 9 || got.Offset != 150 || got.LastEpoch != 1 || got.Epoch != 4 {
				t.Fatalf("answer does not name its fetch: %+v", got)
			}
			for i := range got.Batches {
				got.Batches[i].Data = simBatchPayload(got.Batches[i].Data)
			}
			w := tc.want
			if got.HW != w.HW || got.Err != w.Err || got.Unjudged != w.Unjudged || got.Diverging != w.Diverging ||
				got.DivergingEpoch != w.DivergingEpoch || got.DivergingEnd != w.DivergingEnd ||
				got.ReadFrom != w.ReadFrom || got.ReadTo != w.ReadTo || len(got.Batches) != len(w.Batches) {
				t.Fatalf("got %+v, want %+v", got, w)
			}
			for i := range got.Batches {
				if !sameBatch(got.Batches[i], w.Batches[i]) {
					t.Fatalf("batch %d: %+v, want %+v", i, got.Batches[i], w.Batches[i])
				}
			}
		})
	}
}

// FuzzDecodeFetchAnswer: no input panics, batches are contiguous from the
// fetch offset, and a judged match never comes from a half-set divergence.
func FuzzDecodeFetchAnswer(f *testing.F) {
	f.Add(int16(0), int32(-1), int64(-1), simBatchBytes(Batch{Base: 5, Last: 6, Epoch: 2, Data: []byte("x")}))
	f.Add(int16(0), int32(-1), int64(3), []byte{})
	f.Add(int16(74), int32(2), int64(3), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, code int16, epoch int32, end int64, records []byte) {
		sp := kmsg.NewFetchResponseTopicPartition()
		sp.ErrorCode, sp.RecordBatches = code, records
		sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = epoch, end
		m := DecodeFetchAnswer(Message{Type: MsgFetch, From: 2, To: 1, Offset: 5, LastEpoch: 1}, &sp)
		if m.Err == ErrNone && !m.Diverging && (epoch >= 0 || end >= 0) {
			t.Fatalf("half a divergence (%d,%d) read as a match", epoch, end)
		}
		next := wal.Offset(5)
		for _, b := range m.Batches {
			if b.Base != next || b.Last < b.Base {
				t.Fatalf("batches not contiguous from 5: %+v", m.Batches)
			}
			next = b.End()
		}
	})
}

// FuzzDecodeEnvelopes: no input panics, and what decodes carries only
// election messages without batches and encodes back to the same.
func FuzzDecodeEnvelopes(f *testing.F) {
	ok, _ := EncodeEnvelopes([]Envelope{{Key: PartitionKey{Partition: 3}, Msg: Message{Type: MsgFence, To: 1, Epoch: 7}}})
	f.Add(ok)
	f.Add([]byte(`[{"key":{}}]`))
	f.Add([]byte(`[] []`))
	f.Fuzz(func(t *testing.T, body []byte) {
		envs, err := DecodeEnvelopes(bytes.NewReader(body))
		if err != nil {
			return
		}
		for _, env := range envs {
			if !ElectionMessage(env.Msg) {
				t.Fatalf("decoded a %s", env.Msg.Type)
			}
		}
		again, err := EncodeEnvelopes(envs)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeEnvelopes(bytes.NewReader(again))
		if err != nil || len(back) != len(envs) {
			t.Fatalf("re-encoded envelopes do not decode: %v", err)
		}
	})
}
