package e2e

// Conformance: raw requests that real clients rarely or never send, with
// the exact Kafka error code (as real Kafka clients expect) each must get, and frames
// that must make the broker close the connection. After all of it, the
// data produced first is still there and the process is still running.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// versionRange is what the broker advertises for one API key.
type versionRange struct{ min, max int16 }

// brokerVersions asks the broker which versions it serves (ApiVersions v0,
// which every broker answers).
func brokerVersions(t testing.TB, addr string) map[int16]versionRange {
	t.Helper()
	rc := dialRaw(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(0)
	resp := kmsg.NewPtrApiVersionsResponse()
	rc.roundTrip(req, resp)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("ApiVersions v0: %v", err)
	}
	out := make(map[int16]versionRange)
	for _, k := range resp.ApiKeys {
		out[k.ApiKey] = versionRange{k.MinVersion, k.MaxVersion}
	}
	return out
}

// pickVersion is the highest version of req both sides speak, capped at
// limit (e.g. to stay below topic-ID-only versions).
func pickVersion(t testing.TB, vs map[int16]versionRange, req kmsg.Request, limit int16) int16 {
	t.Helper()
	r, ok := vs[req.Key()]
	if !ok {
		t.Fatalf("broker does not advertise %s (key %d)", kmsg.NameForKey(req.Key()), req.Key())
	}
	v := min(r.max, req.MaxVersion(), limit)
	if v < r.min {
		t.Fatalf("no usable %s version: broker %d-%d, client max %d, cap %d", kmsg.NameForKey(req.Key()), r.min, r.max, req.MaxVersion(), limit)
	}
	return v
}

// Produce and Fetch address topics by ID from v13; these tests address
// them by name.
const lastNamedVersion = 12

// produceRaw sends one batch to one partition and returns that partition's
// answer.
func produceRaw(t testing.TB, addr string, version, acks int16, topic string, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	rc := dialRaw(t, addr)
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks = acks
	req.TimeoutMillis = 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrProduceResponse()
	rc.roundTrip(req, resp)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("Produce v%d: want one topic with one partition in the answer, got %+v", version, resp.Topics)
	}
	if got := resp.Topics[0].Partitions[0].Partition; got != partition {
		t.Fatalf("Produce v%d: answer for partition %d, sent %d", version, got, partition)
	}
	return resp.Topics[0].Partitions[0]
}

// fetchRaw fetches one partition from offset and returns its answer.
func fetchRaw(t testing.TB, addr string, version int16, topic string, partition int32, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	rc := dialRaw(t, addr)
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.MaxWaitMillis = 100
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrFetchResponse()
	rc.roundTrip(req, resp)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("Fetch v%d %s/%d@%d: top-level error %v", version, topic, partition, offset, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("Fetch v%d: want one topic with one partition in the answer, got %d topics", version, len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// codeName renders a Kafka error code for messages.
func codeName(code int16) string {
	if err := kerr.ErrorForCode(code); err != nil {
		var ke *kerr.Error
		if errors.As(err, &ke) {
			return fmt.Sprintf("%d %s", code, ke.Message)
		}
		return fmt.Sprintf("%d %v", code, err)
	}
	return "0 (no error)"
}

func TestConformance(t *testing.T) {
	const (
		dataTopic  = "conf-data"
		smallTopic = "conf-small"
		unknown    = "conf-no-such-topic"
		dataCount  = 200
	)
	b := startBroker(t, brokerOptions{noAutoCreate: true})
	adm := newAdmin(t, b)
	createTopic(t, adm, dataTopic, 1, nil)
	createTopic(t, adm, smallTopic, 1, map[string]*string{"max.message.bytes": strp("1024")})

	// Data produced before any bad input; checked again at the end.
	cl := newClient(t, b, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(dataTopic))
	ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
	defer cancel()
	var before []string
	for i := range dataCount {
		v := fmt.Sprintf("before-%04d", i)
		before = append(before, v)
		cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("produce the initial data: %v", err)
	}

	vs := brokerVersions(t, b.kafkaAddr)
	produceV := pickVersion(t, vs, kmsg.NewPtrProduceRequest(), lastNamedVersion)
	fetchV := pickVersion(t, vs, kmsg.NewPtrFetchRequest(), lastNamedVersion)
	t.Logf("using Produce v%d, Fetch v%d", produceV, fetchV)
	now := time.Now().UnixMilli()
	valid := func() []byte { return encodeBatch(0, now, kv{[]byte("k"), []byte("raw-valid")}) }

	t.Run("ApiVersions/above-max", func(t *testing.T) {
		rc := dialRaw(t, b.kafkaAddr)
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(vs[18].max + 1)
		req.ClientSoftwareName = "sluice-e2e"
		req.ClientSoftwareVersion = "1.0"
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(0) // the answer to a too-new ApiVersions is v0-encoded
		rc.roundTripAs(req, resp)
		if resp.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Errorf("ApiVersions v%d: error %s, want %s", req.Version, codeName(resp.ErrorCode), codeName(kerr.UnsupportedVersion.Code))
		}
		found := false
		for _, k := range resp.ApiKeys {
			if k.ApiKey == 18 {
				found = true
				if k.MinVersion != vs[18].min || k.MaxVersion != vs[18].max {
					t.Errorf("key 18 range %d-%d in the error answer, advertised %d-%d", k.MinVersion, k.MaxVersion, vs[18].min, vs[18].max)
				}
			}
		}
		if !found {
			t.Errorf("error answer does not list key 18: %+v", resp.ApiKeys)
		}
		// The connection stays usable.
		req2 := kmsg.NewPtrApiVersionsRequest()
		req2.SetVersion(0)
		resp2 := kmsg.NewPtrApiVersionsResponse()
		rc.roundTrip(req2, resp2)
		if resp2.ErrorCode != 0 || len(resp2.ApiKeys) == 0 {
			t.Errorf("ApiVersions v0 after the error: error %s, %d keys", codeName(resp2.ErrorCode), len(resp2.ApiKeys))
		}
	})

	t.Run("Produce", func(t *testing.T) {
		// The high watermark of dataTopic must not move on rejected batches.
		hw := func() int64 {
			t.Helper()
			p := fetchRaw(t, b.kafkaAddr, fetchV, dataTopic, 0, 0)
			return p.HighWatermark
		}
		hwBefore := hw()
		bigValue := make([]byte, 2048)
		corrupt := valid()
		corrupt[len(corrupt)-1] ^= 0xff // a byte of the value, covered by the CRC
		tests := []struct {
			name      string
			acks      int16
			topic     string
			partition int32
			batch     []byte
			want      *kerr.Error
		}{
			{"acks=2", 2, dataTopic, 0, valid(), kerr.InvalidRequiredAcks},
			{"acks=-2", -2, dataTopic, 0, valid(), kerr.InvalidRequiredAcks},
			{"bad-crc", -1, dataTopic, 0, corrupt, kerr.CorruptMessage},
			{"control-batch", -1, dataTopic, 0, encodeBatch(0x20, now, kv{nil, []byte("ctl")}), kerr.InvalidRecord},
			{"too-large", -1, smallTopic, 0, encodeBatch(0, now, kv{[]byte("k"), bigValue}), kerr.MessageTooLarge},
			{"unknown-topic-auto-create-off", -1, unknown, 0, valid(), kerr.UnknownTopicOrPartition},
			{"partition-5-of-1", -1, dataTopic, 5, valid(), kerr.UnknownTopicOrPartition},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got := produceRaw(t, b.kafkaAddr, produceV, tt.acks, tt.topic, tt.partition, tt.batch)
				if got.ErrorCode != tt.want.Code {
					t.Errorf("Produce v%d acks=%d to %s/%d: error %s, want %s", produceV, tt.acks, tt.topic, tt.partition, codeName(got.ErrorCode), codeName(tt.want.Code))
				}
			})
		}
		if got := hw(); got != hwBefore {
			t.Errorf("high watermark of %s moved from %d to %d on rejected batches", dataTopic, hwBefore, got)
		}
		if tds, err := adm.ListTopics(ctx, unknown); err == nil {
			if td, ok := tds[unknown]; ok && td.Err == nil {
				t.Errorf("producing to %s with auto-create off created it", unknown)
			}
		}

		t.Run("valid-batch", func(t *testing.T) { // the positive control
			got := produceRaw(t, b.kafkaAddr, produceV, -1, dataTopic, 0, valid())
			if got.ErrorCode != 0 {
				t.Fatalf("Produce v%d of a valid batch: error %s", produceV, codeName(got.ErrorCode))
			}
			if got.BaseOffset != hwBefore {
				t.Errorf("valid batch got base offset %d, want %d (the high watermark before)", got.BaseOffset, hwBefore)
			}
			fp := fetchRaw(t, b.kafkaAddr, fetchV, dataTopic, 0, got.BaseOffset)
			if fp.ErrorCode != 0 {
				t.Fatalf("fetch it back: %s", codeName(fp.ErrorCode))
			}
			recs := decodeBatches(t, fp.RecordBatches)
			if len(recs) == 0 || recs[0].offset != got.BaseOffset || string(recs[0].value) != "raw-valid" {
				t.Errorf("fetched back %+v, want raw-valid at %d", recs, got.BaseOffset)
			}
		})

		t.Run("v2-unsupported", func(t *testing.T) {
			got := produceRaw(t, b.kafkaAddr, 2, -1, dataTopic, 0, valid())
			if got.ErrorCode != kerr.UnsupportedVersion.Code {
				t.Errorf("Produce v2: error %s, want %s", codeName(got.ErrorCode), codeName(kerr.UnsupportedVersion.Code))
			}
		})
	})

	t.Run("CreateTopics", func(t *testing.T) {
		createV := pickVersion(t, vs, kmsg.NewPtrCreateTopicsRequest(), 32767)
		create := func(t *testing.T, name string, partitions int32, configs map[string]string) kmsg.CreateTopicsResponseTopic {
			t.Helper()
			rc := dialRaw(t, b.kafkaAddr)
			req := kmsg.NewPtrCreateTopicsRequest()
			req.SetVersion(createV)
			req.TimeoutMillis = 10_000
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic = name
			rt.NumPartitions = partitions
			rt.ReplicationFactor = 1
			for k, v := range configs {
				c := kmsg.NewCreateTopicsRequestTopicConfig()
				c.Name = k
				c.Value = strp(v)
				rt.Configs = append(rt.Configs, c)
			}
			req.Topics = append(req.Topics, rt)
			resp := kmsg.NewPtrCreateTopicsResponse()
			rc.roundTrip(req, resp)
			if len(resp.Topics) != 1 {
				t.Fatalf("CreateTopics v%d: %d topics in the answer, want 1", createV, len(resp.Topics))
			}
			return resp.Topics[0]
		}
		// In order: later rows depend on earlier ones.
		tests := []struct {
			name       string
			topic      string
			partitions int32
			configs    map[string]string
			want       int16
		}{
			{"slash", "bad/name", 1, nil, kerr.InvalidTopicException.Code},
			{"dot-dot", "..", 1, nil, kerr.InvalidTopicException.Code},
			{"dot", ".", 1, nil, kerr.InvalidTopicException.Code},
			{"empty", "", 1, nil, kerr.InvalidTopicException.Code},
			{"250-chars", strings.Repeat("a", 250), 1, nil, kerr.InvalidTopicException.Code},
			{"249-chars-ok", strings.Repeat("b", 249), 1, nil, 0},
			{"first", "conf-dup", 1, nil, 0},
			{"duplicate", "conf-dup", 1, nil, kerr.TopicAlreadyExists.Code},
			{"bad-config-value", "conf-badcfg", 1, map[string]string{"retention.ms": "abc"}, kerr.InvalidConfig.Code},
			{"unknown-config-key", "conf-badcfg", 1, map[string]string{"no.such.config": "1"}, kerr.InvalidConfig.Code},
			{"zero-partitions", "conf-badcfg", 0, nil, kerr.InvalidPartitions.Code},
			{"negative-partitions", "conf-badcfg", -5, nil, kerr.InvalidPartitions.Code},
			// None of the rejected attempts left a topic behind.
			{"after-rejections", "conf-badcfg", 1, map[string]string{"retention.ms": "60000"}, 0},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got := create(t, tt.topic, tt.partitions, tt.configs)
				if got.ErrorCode != tt.want {
					msg := ""
					if got.ErrorMessage != nil {
						msg = *got.ErrorMessage
					}
					t.Errorf("CreateTopics v%d %q (%d partitions, %v): error %s (%q), want %s",
						createV, tt.topic, tt.partitions, tt.configs, codeName(got.ErrorCode), msg, codeName(tt.want))
				}
			})
		}
	})

	t.Run("Fetch/above-high-watermark", func(t *testing.T) {
		at := fetchRaw(t, b.kafkaAddr, fetchV, dataTopic, 0, 0)
		if at.ErrorCode != 0 || at.HighWatermark < dataCount {
			t.Fatalf("Fetch at 0: error %s, high watermark %d (want >= %d)", codeName(at.ErrorCode), at.HighWatermark, dataCount)
		}
		atHW := fetchRaw(t, b.kafkaAddr, fetchV, dataTopic, 0, at.HighWatermark)
		if atHW.ErrorCode != 0 {
			t.Errorf("Fetch at the high watermark %d: error %s, want none (an empty answer)", at.HighWatermark, codeName(atHW.ErrorCode))
		}
		if atHW.RecordBatches == nil {
			// Kafka always sends an empty record set; librdkafka 2.0.2
			// rejects a null one ("invalid MessageSetSize -1") and never
			// sees the end of the partition.
			t.Errorf("Fetch v%d at the high watermark: records field is null (size -1), want an empty record set (size 0)", fetchV)
		}
		above := fetchRaw(t, b.kafkaAddr, fetchV, dataTopic, 0, at.HighWatermark+100)
		if above.ErrorCode != kerr.OffsetOutOfRange.Code {
			t.Errorf("Fetch at %d (high watermark %d): error %s, want %s", at.HighWatermark+100, at.HighWatermark, codeName(above.ErrorCode), codeName(kerr.OffsetOutOfRange.Code))
		}
	})

	t.Run("ListOffsets/unknown-topic", func(t *testing.T) {
		rc := dialRaw(t, b.kafkaAddr)
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(pickVersion(t, vs, req, 32767))
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = unknown
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = 0
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := kmsg.NewPtrListOffsetsResponse()
		rc.roundTrip(req, resp)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("ListOffsets v%d: want one topic with one partition, got %+v", req.Version, resp.Topics)
		}
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("ListOffsets v%d on %s: error %s, want %s", req.Version, unknown, codeName(got), codeName(kerr.UnknownTopicOrPartition.Code))
		}
	})

	t.Run("BadFrames", func(t *testing.T) {
		// header builds a request header (key, version, correlation id, null client id).
		header := func(key, version int16) []byte {
			h := binary.BigEndian.AppendUint16(nil, uint16(key))
			h = binary.BigEndian.AppendUint16(h, uint16(version))
			h = binary.BigEndian.AppendUint32(h, 7)
			return binary.BigEndian.AppendUint16(h, 0xffff)
		}
		sized := func(size uint32, body []byte) []byte {
			return append(binary.BigEndian.AppendUint32(nil, size), body...)
		}
		truncated := func() []byte {
			rc := &rawConn{t: t}
			req := kmsg.NewPtrProduceRequest()
			req.SetVersion(produceV)
			req.Acks = -1
			req.TimeoutMillis = 1000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = dataTopic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = valid()
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			f := rc.frame(req)
			// Cut the body inside the topic name and shrink the size to
			// match: a complete frame whose body does not parse.
			f = f[:len(f)-len(rp.Records)-20]
			binary.BigEndian.PutUint32(f, uint32(len(f)-4))
			return f
		}
		tests := []struct {
			name      string
			send      []byte
			halfClose bool // close our write side after sending
		}{
			{"unknown-api-key-999", sized(10, header(999, 0)), false},
			{"negative-size", sized(0xffffffff, header(18, 0)), false},
			{"size-2GiB", sized(0x7fffffff, header(18, 0)), false},
			{"truncated-body", truncated(), false},
			{"eof-mid-frame", sized(100, header(3, 1)), true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				rc := dialRaw(t, b.kafkaAddr)
				rc.write(tt.send)
				if tt.halfClose {
					if err := rc.conn.(*net.TCPConn).CloseWrite(); err != nil {
						t.Fatalf("close write side: %v", err)
					}
				}
				rc.expectClosed(tt.name)
				b.Alive(t)
				// A new connection is served.
				if vs2 := brokerVersions(t, b.kafkaAddr); len(vs2) == 0 {
					t.Errorf("after %s: a new connection got no API versions", tt.name)
				}
			})
		}
	})

	t.Run("Survives", func(t *testing.T) {
		b.Alive(t)
		got := consumeFrom(t, b, dataTopic, map[int32]kgo.Offset{0: kgo.NewOffset().AtStart()}, func(got map[int32][]*kgo.Record, n int) (bool, string) {
			return n >= dataCount, fmt.Sprintf("%d of %d records", n, dataCount)
		})
		for i, v := range before {
			if i >= len(got[0]) {
				t.Fatalf("only %d records of the initial %d are readable", len(got[0]), dataCount)
			}
			if string(got[0][i].Value) != v {
				t.Errorf("record %d: %q, want %q", i, got[0][i].Value, v)
			}
		}
		b.Alive(t)
	})
}
