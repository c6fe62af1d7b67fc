package history

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// sample has one event of every kind, each with its optional fields set.
func sample() []Event {
	reb := Rebalance{Process: 3, Group: "g", Member: "m-1", Generation: 2, Partitions: []Partition{0, 1}, At: 40}
	return []Event{
		FaultStart{Fault{ID: 1, Name: "kill", Target: "broker-2", Params: map[string]string{"signal": "KILL"}, At: 5}},
		Send{Process: 1, Key: "k0", Value: "k0-00001", Partition: 0, Outcome: OK, Offset: 0, LeaderEpoch: 1, Invoke: 10, Complete: 20},
		Send{Process: 1, Key: "k0", Value: "k0-00002", Partition: 0, Outcome: Fail, Offset: NoOffset, LeaderEpoch: NoEpoch, Error: "NOT_ENOUGH_REPLICAS", Invoke: 21, Complete: 25},
		Send{Process: 2, Key: "k1", Value: "k1-00001", Partition: 1, Outcome: Info, Offset: NoOffset, LeaderEpoch: NoEpoch, Error: "context deadline exceeded", Invoke: 22, Complete: 90},
		Assign{reb},
		Poll{Process: 3, Consumer: ConsumerGroup, Group: "g", Member: "m-1", Generation: 2, Partition: 0,
			Records: []Record{{Offset: 0, Key: "k0", Value: "k0-00001", LeaderEpoch: 1}}, Invoke: 41, Complete: 50},
		Commit{Process: 3, Group: "g", Member: "m-1", Generation: 2, Partition: 0, Offset: 1, Outcome: OK, Invoke: 51, Complete: 55},
		Commit{Process: 9, Group: "g", Generation: NoGeneration, Partition: 0, Offset: 0, Reset: true, Outcome: Fail, Error: "NON_EMPTY_GROUP", Invoke: 56, Complete: 57},
		Revoke{reb},
		Seek{Process: 4, Partition: 1, Offset: 0, At: 60},
		Poll{Process: 4, Consumer: ConsumerReader, Generation: NoGeneration, Partition: 1, Records: []Record{}, Invoke: 61, Complete: 62},
		FaultStop{Fault{ID: 1, Name: "kill", Target: "broker-2", At: 70}},
		Poll{Process: 5, Consumer: ConsumerDrain, Generation: NoGeneration, Partition: 0,
			Records: []Record{{Offset: 0, Key: "k0", Value: "k0-00001", LeaderEpoch: NoEpoch}}, Invoke: 100, Complete: 110},
		TieredRead{Process: 6, Partition: 0, From: 0, To: 1, Records: []Record{{Offset: 0, Key: "k0", Value: "k0-00001", LeaderEpoch: 1}}, Invoke: 111, Complete: 112},
		ReplicaLog{Partition: 0, Broker: 1, LogStart: 0, HighWatermark: 1, Entries: []ReplicaEntry{{Offset: 0, Digest: Digest([]byte("k0"), []byte("k0-00001")), Epoch: 1}}},
		Final{Partition: 0, LogStart: 0, HighWatermark: 1, At: 120},
	}
}

func encode(t testing.TB, h Header, evs []Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	rec, err := NewRecorder(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if err := rec.Record(e); err != nil {
			t.Fatalf("record %#v: %v", e, err)
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	h := Header{StartUnixNano: 1_700_000_000_000_000_000, Topic: "chaos", Seed: 42}
	b := encode(t, h, sample())
	gotH, got, err := ReadAll(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	h.Version = Version
	if gotH != h {
		t.Fatalf("header %+v, want %+v", gotH, h)
	}
	if !reflect.DeepEqual(got, sample()) {
		t.Fatalf("events differ:\n got %#v\nwant %#v", got, sample())
	}
	if n := bytes.Count(b, []byte("\n")); n != len(sample())+1 {
		t.Fatalf("%d lines, want one per event plus the header", n)
	}
}

func TestLineLayout(t *testing.T) {
	b, err := MarshalEvent(sample()[1])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"send","process":1,"key":"k0","value":"k0-00001","partition":0,"outcome":"ok","offset":0,"leader_epoch":1,"invoke":10,"complete":20}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	b, err = MarshalEvent(sample()[4])
	if err != nil {
		t.Fatal(err)
	}
	want = `{"type":"assign","process":3,"group":"g","member":"m-1","generation":2,"partitions":[0,1],"at":40}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

func TestReaderErrors(t *testing.T) {
	header := `{"type":"header","version":1,"start_unix_nano":0,"topic":"t","seed":0}`
	send := `{"type":"send","process":1,"key":"k","value":"v","partition":0,"outcome":"ok","offset":3,"leader_epoch":1,"invoke":1,"complete":2}`
	tests := []struct {
		name     string
		in       string
		line     int
		sentinel error
		events   int // decoded before the error
	}{
		{"empty input", "", 1, ErrMalformed, 0},
		{"newer version", `{"type":"header","version":2,"start_unix_nano":0,"topic":"t","seed":0,"new":1}` + "\n" + send, 1, ErrVersion, 0},
		{"missing version", `{"type":"header","topic":"t"}`, 1, ErrVersion, 0},
		{"first line not a header", send + "\n" + send, 1, ErrMalformed, 0},
		{"unknown field in header", `{"type":"header","version":1,"topic":"t","extra":true}`, 1, ErrMalformed, 0},
		{"unknown event type", header + "\n" + send + "\n" + `{"type":"gossip"}`, 3, ErrMalformed, 1},
		{"unknown field", header + "\n" + strings.Replace(send, `"key"`, `"color":"red","key"`, 1), 2, ErrMalformed, 0},
		{"no type", header + "\n" + `{"process":1}`, 2, ErrMalformed, 0},
		{"not json", header + "\n" + send + "\n" + send + "\nsend k v\n", 4, ErrMalformed, 2},
		{"truncated last line", header + "\n" + send + "\n" + send[:40], 3, ErrMalformed, 1},
		{"empty line", header + "\n\n" + send, 2, ErrMalformed, 0},
		{"second header", header + "\n" + header, 2, ErrMalformed, 0},
		{"invalid event", header + "\n" + strings.Replace(send, `"offset":3`, `"offset":-1`, 1), 2, ErrMalformed, 0},
		{"fail without error", header + "\n" + strings.NewReplacer(`"ok"`, `"fail"`, `"offset":3`, `"offset":-1`, `"leader_epoch":1`, `"leader_epoch":-1`).Replace(send), 2, ErrMalformed, 0},
		{"trailing data", header + "\n" + send + ` {}`, 2, ErrMalformed, 0},
		{"number too big", header + "\n" + strings.Replace(send, `"partition":0`, `"partition":4294967296`, 1), 2, ErrMalformed, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, evs, err := ReadAll(strings.NewReader(tt.in))
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error %v is not a *LineError", err)
			}
			if le.Line != tt.line {
				t.Fatalf("line %d, want %d (%v)", le.Line, tt.line, err)
			}
			if !errors.Is(err, tt.sentinel) {
				t.Fatalf("error %v does not wrap %v", err, tt.sentinel)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("line %d:", tt.line)) {
				t.Fatalf("message %q has no line number", err)
			}
			if len(evs) != tt.events {
				t.Fatalf("%d events before the error, want %d", len(evs), tt.events)
			}
		})
	}
}

func TestReaderAcceptsMissingFinalNewlineAndCRLF(t *testing.T) {
	b := encode(t, Header{Topic: "t"}, sample()[:3])
	crlf := bytes.ReplaceAll(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"), []byte("\r\n"))
	_, evs, err := ReadAll(bytes.NewReader(crlf))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(evs, sample()[:3]) {
		t.Fatalf("got %#v", evs)
	}
}

func TestReaderLineNumbers(t *testing.T) {
	rd, err := NewReader(bytes.NewReader(encode(t, Header{Topic: "t"}, sample()[:2])))
	if err != nil {
		t.Fatal(err)
	}
	for want := 2; want <= 3; want++ {
		if _, err := rd.Next(); err != nil {
			t.Fatal(err)
		}
		if rd.Line() != want {
			t.Fatalf("line %d, want %d", rd.Line(), want)
		}
	}
	if _, err := rd.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last event: %v, want io.EOF", err)
	}
}

func TestRecordRejectsInvalidEvents(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
	}{
		{"ok send without offset", Send{Process: 1, Value: "v", Outcome: OK, Offset: NoOffset, LeaderEpoch: NoEpoch}},
		{"info send with offset", Send{Process: 1, Value: "v", Outcome: Info, Offset: 4, LeaderEpoch: NoEpoch}},
		{"send without value", Send{Process: 1, Outcome: OK, Offset: 4}},
		{"send completing before invoke", Send{Process: 1, Value: "v", Outcome: OK, Offset: 4, Invoke: 9, Complete: 8}},
		{"group poll without generation", Poll{Consumer: ConsumerGroup, Group: "g", Member: "m", Generation: NoGeneration}},
		{"reader poll with a group", Poll{Consumer: ConsumerReader, Group: "g", Generation: NoGeneration}},
		{"poll of unknown consumer", Poll{Consumer: "spy", Generation: NoGeneration}},
		{"commit without group", Commit{Outcome: OK}},
		{"assign with negative partition", Assign{Rebalance{Group: "g", Member: "m", Partitions: []Partition{-1}}}},
		{"replica entry above its HW", ReplicaLog{HighWatermark: 1, Entries: []ReplicaEntry{{Offset: 1, Digest: "x"}}}},
		{"tiered record outside its range", TieredRead{From: 2, To: 3, Records: []Record{{Offset: 1}}}},
		{"final with HW below log start", Final{LogStart: 5, HighWatermark: 4}},
		{"fault without name", FaultStart{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			rec, err := NewRecorder(&buf, Header{Topic: "t"})
			if err != nil {
				t.Fatal(err)
			}
			if err := rec.Record(tt.ev); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Record: %v, want ErrMalformed", err)
			}
			// The rejection does not poison the recorder.
			if err := rec.Record(sample()[1]); err != nil {
				t.Fatalf("a valid event after a rejected one: %v", err)
			}
			if err := rec.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRecorderConcurrent(t *testing.T) {
	var buf bytes.Buffer
	rec, err := NewRecorder(&buf, Header{Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 500
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				s := Send{Process: Process(w), Key: "k", Value: fmt.Sprintf("p%d-%05d", w, i), Outcome: OK, Offset: Offset(i), LeaderEpoch: NoEpoch, Invoke: rec.Now(), Complete: rec.Now()}
				if s.Complete < s.Invoke {
					s.Complete = s.Invoke
				}
				if err := rec.Record(s); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	// A recorder that deadlocks fails here in seconds, not at the package
	// timeout.
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out after 10s waiting for the writers to record their events")
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rec.Record(sample()[1]); !errors.Is(err, ErrClosed) {
		t.Fatalf("Record after Close: %v", err)
	}
	_, evs, err := ReadAll(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != writers*each {
		t.Fatalf("%d events, want %d", len(evs), writers*each)
	}
	next := make(map[Process]Offset)
	for _, e := range evs {
		s := e.(Send)
		if s.Offset != next[s.Process] {
			t.Fatalf("process %d: offset %d, want %d (per-writer order lost)", s.Process, s.Offset, next[s.Process])
		}
		next[s.Process]++
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, errors.New("disk full")
	}
	w.n--
	return len(p), nil
}

func TestRecorderWriteErrorIsSticky(t *testing.T) {
	rec, err := NewRecorder(&failingWriter{n: 0}, Header{Topic: "t"})
	if err != nil {
		t.Fatal(err) // the header sits in the buffer
	}
	if err := rec.Flush(); err == nil {
		t.Fatal("Flush to a failing writer succeeded")
	}
	if err := rec.Record(sample()[1]); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Record after a failed flush: %v", err)
	}
	if err := rec.Close(); err == nil {
		t.Fatal("Close after a failed flush succeeded")
	}
}

func TestCreateAndReadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := Create(path, Header{Topic: "t", Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range sample() {
		if err := rec.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	h, evs, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if h.Seed != 7 || h.Version != Version || h.StartUnixNano == 0 {
		t.Fatalf("header %+v", h)
	}
	if !reflect.DeepEqual(evs, sample()) {
		t.Fatal("events differ after a file round trip")
	}
}

func TestDigest(t *testing.T) {
	a := Digest([]byte("k"), []byte("v1"))
	if len(a) != 16 || a == Digest([]byte("k"), []byte("v2")) || a != Digest([]byte("k"), []byte("v1")) {
		t.Fatalf("digest %q", a)
	}
	// The key length is part of the digest: ("ab","c") differs from ("a","bc").
	if Digest([]byte("ab"), []byte("c")) == Digest([]byte("a"), []byte("bc")) {
		t.Fatal("key/value boundary not in the digest")
	}
}
