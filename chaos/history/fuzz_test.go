package history

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
)

// FuzzReader feeds arbitrary bytes to the decoder. It must not panic, must
// classify every decoding error (ErrMalformed or ErrVersion, with a line
// number), and the events it decoded before stopping (a valid prefix) must
// encode and decode again to the same values.
func FuzzReader(f *testing.F) {
	valid := encode(f, Header{Topic: "t", Seed: 1, StartUnixNano: 1}, sample())
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add([]byte(`{"type":"header","version":2}`))
	f.Add([]byte(`{"type":"header","version":1,"topic":"t"}` + "\n" + `{"type":"poll","consumer":"drain","generation":-1,"records":null}`))
	f.Add([]byte(`{"type":"header","version":1}` + "\n" + `{"type":"seek","process":1,"partition":2,"offset":3,"at":4,"Offset":5}`))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rd, err := NewReader(bytes.NewReader(b))
		if err != nil {
			checkClassified(t, err)
			return
		}
		var evs []Event
		for {
			ev, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				checkClassified(t, err)
				break
			}
			evs = append(evs, ev)
		}
		h := rd.Header()
		again := encodeRaw(t, h, evs)
		h2, evs2, err := ReadAll(bytes.NewReader(again))
		if err != nil {
			t.Fatalf("re-decoding a valid prefix: %v\n%s", err, again)
		}
		if h2 != h || !reflect.DeepEqual(evs2, evs) {
			t.Fatalf("valid prefix changed in a round trip:\n%#v\n%#v", evs, evs2)
		}
	})
}

func checkClassified(t *testing.T, err error) {
	t.Helper()
	var le *LineError
	if !errors.As(err, &le) || le.Line < 1 {
		t.Fatalf("error without a line number: %v", err)
	}
	if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) {
		t.Fatalf("unclassified error: %v", err)
	}
}

// encodeRaw writes a history line by line, keeping the header as it is
// (NewRecorder would fill in a zero start time).
func encodeRaw(t *testing.T, h Header, evs []Event) []byte {
	t.Helper()
	line, err := MarshalHeader(h)
	if err != nil {
		t.Fatal(err)
	}
	out := append(line, '\n')
	for _, e := range evs {
		line, err := MarshalEvent(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(append(out, line...), '\n')
	}
	return out
}
