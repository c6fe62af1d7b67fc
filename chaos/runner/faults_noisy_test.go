package runner

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestJudgeQuiet: the quiet workload's rate during a burst is judged
// against the median of its calm seconds.
func TestJudgeQuiet(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	// 1,000 acks a second, except during the burst from 10 s to 16 s.
	samples := func(during int64) []ackSample {
		var out []ackSample
		var acked int64
		for s := 0; s <= 30; s++ {
			out = append(out, ackSample{at: at(s), acked: acked})
			if s >= 10 && s < 16 {
				acked += during
			} else {
				acked += 1000
			}
		}
		return out
	}
	bursts := [][2]time.Time{{at(10), at(16)}}
	if bad := judgeQuiet(samples(900), bursts); len(bad) != 0 {
		t.Errorf("900/s during a burst (floor 700) judged bad: %v", bad)
	}
	bad := judgeQuiet(samples(300), bursts)
	if len(bad) != 1 || !strings.Contains(bad[0], "300 acknowledged sends/s during noisy burst 1") {
		t.Errorf("300/s during a burst judged %v, want one violation", bad)
	}
	if bad := judgeQuiet(samples(300)[:3], bursts); bad != nil {
		t.Errorf("a run too short for a baseline judged %v", bad)
	}
}

// TestNoisyClientUncompressed: the noisy producer sends its batches
// uncompressed, so the bytes the broker charges to producer_byte_rate are
// at least the value bytes stopNoisy judges (with franz-go's default
// snappy, 1 KiB of zeros is a few dozen bytes on the wire and the tenant
// looked five times over its quota while the broker held it to it).
func TestNoisyClientUncompressed(t *testing.T) {
	cl, err := newNoisyClient([]string{"127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	codecs, _ := cl.OptValue(kgo.ProducerBatchCompression).([]kgo.CompressionCodec)
	if len(codecs) != 1 || codecs[0] != kgo.NoCompression() {
		t.Fatalf("noisy producer's compression %v, want only none", codecs)
	}
}

// TestNoisyRunCountsTheThrottleStillServed: the run's length for the
// quota's judgement ends with the longest throttle a broker imposed, when
// that ends after the run stops (the last answers were paid for by it).
func TestNoisyRunCountsTheThrottleStillServed(t *testing.T) {
	start := time.Now()
	n := &noisyState{start: start, throttle: &throttleEnd{}}
	stop := start.Add(50 * time.Second)
	if got := n.runFor(stop); got != 50*time.Second {
		t.Fatalf("no throttle: %v, want 50s", got)
	}
	n.throttle.OnBrokerThrottle(kgo.BrokerMetadata{}, time.Hour, true)
	n.throttle.OnBrokerThrottle(kgo.BrokerMetadata{}, time.Second, true) // shorter: the longer end stays
	if got := n.runFor(stop); got < time.Hour {
		t.Fatalf("a throttle ending an hour from now: run of %v, want at least an hour", got)
	}
}
