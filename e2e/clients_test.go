package e2e

// Real clients other than franz-go: kcat and confluent-kafka-python, both
// on Debian's librdkafka, which negotiates features from the advertised
// version ranges (as real Kafka clients expect).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// runTool runs a command with stdin, failing the test on a non-zero exit
// or the deadline, and returns its stdout.
func runTool(t testing.TB, timeout time.Duration, stdin string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v (deadline %v)\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, timeout, stdout.String(), lastN(stderr.String(), 4000))
	}
	return stdout.String()
}

func lastN(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func TestKcat(t *testing.T) {
	kcat := requireTool(t, "kcat")
	b := startBroker(t, brokerOptions{})
	adm := newAdmin(t, b)

	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run("codec-"+codec, func(t *testing.T) {
			topic := "kcat-" + codec
			createTopic(t, adm, topic, 1, nil)
			var in, want strings.Builder
			for i := range 50 {
				// Repetitive values so every codec really compresses.
				k, v := fmt.Sprintf("key-%02d", i), fmt.Sprintf("value %d %s", i, strings.Repeat(codec, 20))
				fmt.Fprintf(&in, "%s:%s\n", k, v)
				fmt.Fprintf(&want, "%s=%s\n", k, v)
			}
			runTool(t, time.Minute, in.String(), kcat, "-P", "-b", b.kafkaAddr, "-t", topic, "-z", codec, "-K:",
				"-X", "acks=all", "-X", "enable.idempotence=true")
			got := runTool(t, 20*time.Second, "", kcat, "-C", "-b", b.kafkaAddr, "-t", topic, "-o", "beginning", "-e", "-f", `%k=%s\n`)
			if got != want.String() {
				t.Errorf("kcat -C of %s:\n%s\nwant:\n%s", topic, lastN(got, 2000), lastN(want.String(), 2000))
			}
		})
	}

	t.Run("metadata-json", func(t *testing.T) {
		const topic = "kcat-meta"
		createTopic(t, adm, topic, 2, nil)
		out := runTool(t, time.Minute, "", kcat, "-L", "-J", "-b", b.kafkaAddr)
		var md struct {
			OriginatingBroker struct {
				ID   int    `json:"id"`
				Name string `json:"name"`
			} `json:"originating_broker"`
			Brokers []struct {
				ID   int    `json:"id"`
				Name string `json:"name"`
			} `json:"brokers"`
			Topics []struct {
				Topic      string `json:"topic"`
				Partitions []struct {
					Partition int `json:"partition"`
					Leader    int `json:"leader"`
				} `json:"partitions"`
			} `json:"topics"`
		}
		if err := json.Unmarshal([]byte(out), &md); err != nil {
			t.Fatalf("kcat -L -J output is not JSON: %v\n%s", err, lastN(out, 2000))
		}
		if len(md.Brokers) != 1 || md.Brokers[0].ID != b.opts.nodeID || md.Brokers[0].Name != b.kafkaAddr {
			t.Errorf("brokers %+v, want exactly [{id %d name %s}]", md.Brokers, b.opts.nodeID, b.kafkaAddr)
		}
		found := false
		for _, tp := range md.Topics {
			if tp.Topic != topic {
				continue
			}
			found = true
			if len(tp.Partitions) != 2 {
				t.Errorf("%s has %d partitions in kcat -L -J, want 2", topic, len(tp.Partitions))
			}
			for _, p := range tp.Partitions {
				if p.Leader != b.opts.nodeID {
					t.Errorf("%s partition %d led by %d, want %d", topic, p.Partition, p.Leader, b.opts.nodeID)
				}
			}
		}
		if !found {
			t.Errorf("topic %s missing from kcat -L -J: %s", topic, lastN(out, 2000))
		}
	})

	t.Run("query-timestamp", func(t *testing.T) {
		const topic = "kcat-ts"
		createTopic(t, adm, topic, 1, nil)
		cl := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
		base := time.Now().Add(-time.Hour).Truncate(time.Second)
		var recs []*kgo.Record
		for i := range 20 {
			recs = append(recs, &kgo.Record{Value: []byte(strconv.Itoa(i)), Timestamp: base.Add(time.Duration(i) * time.Second)})
		}
		ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
		defer cancel()
		res := cl.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce with timestamps: %v", err)
		}
		// Between records 11 and 12: the answer is record 12's offset.
		target := base.Add(11*time.Second + 500*time.Millisecond).UnixMilli()
		want := res[12].Record.Offset
		out := runTool(t, time.Minute, "", kcat, "-Q", "-b", b.kafkaAddr, "-t", fmt.Sprintf("%s:0:%d", topic, target))
		m := regexp.MustCompile(`\[0\]\s+offset\s+(-?\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("kcat -Q output has no offset for partition 0: %q", out)
		}
		if got, _ := strconv.ParseInt(m[1], 10, 64); got != want {
			t.Errorf("kcat -Q %s:0:%d answered offset %d, want %d", topic, target, got, want)
		}
	})
}

func TestConfluentPython(t *testing.T) {
	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import confluent_kafka").CombinedOutput(); err != nil {
		requireCI(t, python+" with confluent_kafka", fmt.Errorf("%w: %s", err, out))
	}
	b := startBroker(t, brokerOptions{})
	out := runTool(t, 2*time.Minute, "", python, "testdata/confluent_roundtrip.py",
		"--bootstrap", b.kafkaAddr, "--topic", "confluent-roundtrip", "--partitions", "3", "--count", "2000")
	if !strings.Contains(out, "OK") {
		t.Errorf("confluent_roundtrip.py did not report OK:\n%s", lastN(out, 4000))
	}
	t.Logf("confluent_roundtrip.py: %s", strings.TrimSpace(lastN(out, 500)))

	// What the script wrote is what franz-go reads back.
	got := consumeAll(t, b, "confluent-roundtrip", 3, 2000)
	seen := make(map[string]bool)
	for _, recs := range got {
		for _, r := range recs {
			seen[string(r.Value)] = true
		}
	}
	for i := range 2000 {
		if v := fmt.Sprintf("value-%d", i); !seen[v] {
			t.Fatalf("franz-go does not find %q written by confluent-kafka", v)
		}
	}
}
