package e2e

// A flood of connections that announce large requests and send part of them,
// against a real sluiced: its memory stays within the request budget and
// other clients are served (issue 7 items 8 and 11).

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// procStatusKiB reads a kB field (VmRSS, VmHWM) of /proc/<pid>/status.
func procStatusKiB(t testing.TB, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc status for the broker: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("parse %s %q: %v", field, v, err)
			}
			return n
		}
	}
	t.Fatalf("%s missing from /proc/%d/status", field, pid)
	return 0
}

func (b *broker) pid() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cmd.Process.Pid
}

// TestRequestFlood: 30 connections each announce a 15 MiB request and send
// 5 MiB of it (150 MiB in all), then stall. Before the request budget the
// broker allocated every announced frame and its resident memory grew by the
// bytes sent; now it holds at most its 16 MiB budget (plus one frame), stops
// reading while that is spent, and closes the stalled connections after the
// idle timeout. A producer and a consumer started during the flood finish,
// and a frame larger than the whole budget is refused.
func TestRequestFlood(t *testing.T) {
	const (
		budget   = 16 << 20
		conns    = 30
		announce = 15 << 20
		sent     = 5 << 20
		limitMiB = 110 // budget + one frame + garbage between collections
	)
	b := startBroker(t, brokerOptions{extraArgs: []string{
		"--queued-max-request-bytes", strconv.Itoa(budget),
		"--connections-max-idle", "1s",
	}})
	cl := newClient(t, b, kgo.DefaultProduceTopic("flood"), kgo.ConsumeTopics("flood"))
	createTopic(t, newAdmin(t, b), "flood", 1, nil)
	baseKiB := procStatusKiB(t, b.pid(), "VmRSS")

	// A frame larger than the budget is refused: the connection is closed.
	big, err := net.Dial("tcp", b.kafkaAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	if _, err := big.Write(binary.BigEndian.AppendUint32(nil, budget+1)); err != nil {
		t.Fatal(err)
	}
	if err := big.SetReadDeadline(time.Now().Add(defaultTimeout)); err != nil {
		t.Fatal(err)
	}
	if n, err := big.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("a frame over the budget: read %d bytes, %v; want the connection closed", n, err)
	}

	payload := append(binary.BigEndian.AppendUint32(nil, announce), make([]byte, sent)...)
	for i := range payload[4:] {
		payload[4+i] = byte(i) // not zeros: nothing may share pages
	}
	var wg sync.WaitGroup
	for range conns {
		nc, err := net.Dial("tcp", b.kafkaAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = nc.Write(payload) // ends when the broker has read it all or closed the connection
		}()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*defaultTimeout)
	defer cancel()
	const records = 20
	for i := range records {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "during the flood %d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d during the flood: %v", i, err)
		}
	}
	for got := 0; got < records; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records during the flood: %v", got, records, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		got += fs.NumRecords()
	}
	// Every flood connection was read to its stall and closed idle; a broker
	// that does neither fails here, and the deferred Close frees the writers.
	flooded := make(chan struct{})
	go func() { wg.Wait(); close(flooded) }()
	select {
	case <-flooded:
	case <-time.After(defaultTimeout):
		t.Fatalf("timed out after %v waiting for the broker to read or close every flood connection", defaultTimeout)
	}

	peakKiB := procStatusKiB(t, b.pid(), "VmHWM")
	t.Logf("broker resident memory %d MiB before the flood, peak %d MiB (+%d MiB; %d MiB sent by the flood)",
		baseKiB>>10, peakKiB>>10, (peakKiB-baseKiB)>>10, conns*sent>>20)
	if grew := (peakKiB - baseKiB) >> 10; grew > limitMiB {
		t.Fatalf("broker resident memory grew by %d MiB during the flood; the %d MiB request budget allows about %d MiB",
			grew, budget>>20, limitMiB)
	}
	b.Alive(t)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
