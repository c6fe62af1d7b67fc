package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeLeader accepts one connection and answers each request with what
// answer returns for its correlation ID (raw frame body, without the size).
func fakeLeader(t *testing.T, answer func(corr int32) []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		for {
			var size [4]byte
			if _, err := io.ReadFull(conn, size[:]); err != nil {
				return
			}
			body := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(conn, body); err != nil {
				return
			}
			r := kbin.Reader{Src: body}
			if key, version := r.Int16(), r.Int16(); key != 1 || version != replicaFetchVersion {
				t.Errorf("request key %d version %d, want Fetch v%d", key, version, replicaFetchVersion)
				return
			}
			out := answer(r.Int32())
			if out == nil {
				return // hang up
			}
			frame := binary.BigEndian.AppendUint32(nil, uint32(len(out)))
			if _, err := conn.Write(append(frame, out...)); err != nil {
				return
			}
		}
	}()
	return ln.Addr().String()
}

// fetchAnswer encodes a Fetch v13 answer with header for corr.
func fetchAnswer(corr int32, hw int64) []byte {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(replicaFetchVersion)
	rt := kmsg.NewFetchResponseTopic()
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.HighWatermark = hw
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	out := kbin.AppendInt32(nil, corr)
	out = append(out, 0) // no header tags
	return resp.AppendTo(out)
}

func TestReplicaConnExchanges(t *testing.T) {
	addr := fakeLeader(t, func(corr int32) []byte { return fetchAnswer(corr, int64(corr)*10) })
	rc, err := dialReplica(context.Background(), addr, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.close()
	for i := 1; i <= 3; i++ {
		resp, err := rc.fetch(context.Background(), kmsg.NewPtrFetchRequest(), time.Second)
		if err != nil {
			t.Fatalf("fetch %d: %v", i, err)
		}
		if hw := resp.Topics[0].Partitions[0].HighWatermark; hw != int64(i)*10 {
			t.Fatalf("fetch %d: answer with HW %d, want %d", i, hw, i*10)
		}
	}
}

// TestReplicaConnRefusesBadAnswers: an answer to another request, a frame
// too large, a truncated body, a hang-up or a timeout each fail the fetch
// and close the connection.
func TestReplicaConnRefusesBadAnswers(t *testing.T) {
	for name, answer := range map[string]func(int32) []byte{
		"wrong correlation": func(corr int32) []byte { return fetchAnswer(corr+1, 0) },
		"truncated body":    func(corr int32) []byte { return fetchAnswer(corr, 0)[:9] },
		"hang-up":           func(int32) []byte { return nil },
	} {
		t.Run(name, func(t *testing.T) { checkBadAnswer(t, fakeLeader(t, answer)) })
	}
	t.Run("oversized frame", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
			_, _ = io.ReadFull(conn, make([]byte, 4))
			// Only the size of a frame larger than any answer may be.
			_, _ = conn.Write(binary.BigEndian.AppendUint32(nil, replicaMaxAnswerBytes+1))
			time.Sleep(time.Second)
		}()
		checkBadAnswer(t, ln.Addr().String())
	})
	t.Run("timeout", func(t *testing.T) {
		checkBadAnswer(t, fakeLeader(t, func(int32) []byte { time.Sleep(2 * time.Second); return nil }))
	})
}

func checkBadAnswer(t *testing.T, addr string) {
	t.Helper()
	rc, err := dialReplica(context.Background(), addr, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.close()
	_, err = rc.fetch(context.Background(), kmsg.NewPtrFetchRequest(), 300*time.Millisecond)
	if !errors.Is(err, errReplicaConn) {
		t.Fatalf("fetch = %v, want an errReplicaConn", err)
	}
	if rc.conn != nil {
		t.Fatal("the connection stays open after a bad answer")
	}
	if _, err := rc.fetch(context.Background(), kmsg.NewPtrFetchRequest(), time.Second); err == nil {
		t.Fatal("a closed connection answered")
	}
}

// TestReplicaConnEndsWithItsContext: cancelling the context interrupts a
// fetch the leader holds.
func TestReplicaConnEndsWithItsContext(t *testing.T) {
	addr := fakeLeader(t, func(int32) []byte { time.Sleep(5 * time.Second); return nil })
	rc, err := dialReplica(context.Background(), addr, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	began := time.Now()
	if _, err := rc.fetch(ctx, kmsg.NewPtrFetchRequest(), time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("fetch = %v, want context.Canceled", err)
	}
	if d := time.Since(began); d > 3*time.Second {
		t.Fatalf("the fetch ended %v after the cancel", d)
	}
}

// FuzzDecodeReplicaAnswer: any bytes a peer sends as an answer decode to a
// response or an error, never a panic; a valid answer decodes as encoded.
func FuzzDecodeReplicaAnswer(f *testing.F) {
	f.Add(fetchAnswer(7, 70), int32(7))
	f.Add(fetchAnswer(7, 70)[:12], int32(7))
	f.Add([]byte{0, 0, 0, 7, 5, 1, 2}, int32(7))
	f.Fuzz(func(t *testing.T, body []byte, corr int32) {
		resp, err := decodeReplicaAnswer(body, corr)
		if err == nil && resp == nil {
			t.Fatal("no answer and no error")
		}
	})
}

func TestDecodeReplicaAnswerRoundTrip(t *testing.T) {
	resp, err := decodeReplicaAnswer(fetchAnswer(9, 1234), 9)
	if err != nil {
		t.Fatal(err)
	}
	if hw := resp.Topics[0].Partitions[0].HighWatermark; hw != 1234 {
		t.Fatalf("HW %d, want 1234", hw)
	}
	if _, err := decodeReplicaAnswer(fetchAnswer(9, 1234), 10); err == nil {
		t.Fatal("an answer to request 9 was taken for request 10")
	}
}
