package meta

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

func assertSameTopic(t *testing.T, got, want Topic) {
	t.Helper()
	if got.Name != want.Name || got.ID != want.ID || got.Partitions != want.Partitions ||
		got.ReplicationFactor != want.ReplicationFactor || got.Revision != want.Revision ||
		!maps.Equal(got.Configs, want.Configs) {
		t.Errorf("topic = %+v, want %+v", got, want)
	}
}

func TestTopicLifecycle(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)

	created, err := s.CreateTopic(ctx, Topic{Name: "orders", Partitions: 3, ReplicationFactor: 1,
		Configs: map[string]string{"cleanup.policy": "delete"}})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if created.ID == [16]byte{} || created.Revision == 0 {
		t.Fatalf("created topic lacks ID or revision: %+v", created)
	}
	if len(created.IDString()) != 22 {
		t.Errorf("IDString %q is not 22 chars", created.IDString())
	}
	got, err := s.Topic(ctx, "orders")
	if err != nil {
		t.Fatalf("Topic: %v", err)
	}
	assertSameTopic(t, got, created)

	got.Partitions = 6
	got.Configs = map[string]string{"cleanup.policy": "delete", "retention.ms": "-1"}
	updated, err := s.UpdateTopic(ctx, got)
	if err != nil {
		t.Fatalf("UpdateTopic: %v", err)
	}
	if updated.Revision <= created.Revision {
		t.Errorf("update revision %d not after create revision %d", updated.Revision, created.Revision)
	}
	reread, err := s.Topic(ctx, "orders")
	if err != nil {
		t.Fatalf("Topic after update: %v", err)
	}
	assertSameTopic(t, reread, updated)

	deleted, err := s.DeleteTopic(ctx, "orders")
	if err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	assertSameTopic(t, deleted, updated)
	if _, err := s.Topic(ctx, "orders"); !errors.Is(err, ErrTopicNotFound) {
		t.Errorf("Topic after delete: got %v, want ErrTopicNotFound", err)
	}
	if _, err := s.DeleteTopic(ctx, "orders"); !errors.Is(err, ErrTopicNotFound) {
		t.Errorf("second DeleteTopic: got %v, want ErrTopicNotFound", err)
	}
	if _, err := s.UpdateTopic(ctx, updated); !errors.Is(err, ErrTopicNotFound) {
		t.Errorf("UpdateTopic after delete: got %v, want ErrTopicNotFound", err)
	}
}

func TestTopicErrors(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	first, err := s.CreateTopic(ctx, Topic{Name: "dup", Partitions: 2, ReplicationFactor: 1})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}

	t.Run("duplicate create", func(t *testing.T) {
		_, err := s.CreateTopic(ctx, Topic{Name: "dup", Partitions: 1, ReplicationFactor: 1})
		if !errors.Is(err, ErrTopicExists) {
			t.Fatalf("got %v, want ErrTopicExists", err)
		}
	})
	t.Run("stale revision", func(t *testing.T) {
		fresh := first
		fresh.Configs = map[string]string{"retention.ms": "1000"}
		if _, err := s.UpdateTopic(ctx, fresh); err != nil {
			t.Fatalf("first update: %v", err)
		}
		stale := first
		stale.Partitions = 4
		if _, err := s.UpdateTopic(ctx, stale); !errors.Is(err, ErrConflict) {
			t.Fatalf("update at stale revision: got %v, want ErrConflict", err)
		}
	})
	t.Run("partition decrease", func(t *testing.T) {
		cur, err := s.Topic(ctx, "dup")
		if err != nil {
			t.Fatalf("Topic: %v", err)
		}
		cur.Partitions = 1
		if _, err := s.UpdateTopic(ctx, cur); !errors.Is(err, ErrInvalidPartitions) {
			t.Fatalf("got %v, want ErrInvalidPartitions", err)
		}
	})

	invalid := []struct {
		name  string
		topic Topic
		want  error
	}{
		{"zero partitions", Topic{Name: "p0", Partitions: 0, ReplicationFactor: 1}, ErrInvalidPartitions},
		{"negative partitions", Topic{Name: "pn", Partitions: -1, ReplicationFactor: 1}, ErrInvalidPartitions},
		{"zero replication", Topic{Name: "r0", Partitions: 1, ReplicationFactor: 0}, ErrInvalidReplicationFactor},
		{"slash in name", Topic{Name: "a/b", Partitions: 1, ReplicationFactor: 1}, ErrInvalidTopic},
		{"empty name", Topic{Partitions: 1, ReplicationFactor: 1}, ErrInvalidTopic},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.CreateTopic(ctx, tt.topic); !errors.Is(err, tt.want) {
				t.Fatalf("CreateTopic(%+v): got %v, want %v", tt.topic, err, tt.want)
			}
		})
	}
}

func TestRecreatedTopicGetsNewID(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	first, err := s.CreateTopic(ctx, Topic{Name: "again", Partitions: 1, ReplicationFactor: 1})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if _, err := s.DeleteTopic(ctx, "again"); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	second, err := s.CreateTopic(ctx, Topic{Name: "again", Partitions: 1, ReplicationFactor: 1})
	if err != nil {
		t.Fatalf("CreateTopic again: %v", err)
	}
	if second.ID == first.ID {
		t.Fatalf("recreated topic kept ID %x", first.ID)
	}
	// An update prepared against the first incarnation must not apply to the second.
	if _, err := s.UpdateTopic(ctx, first); !errors.Is(err, ErrConflict) {
		t.Errorf("update of old incarnation: got %v, want ErrConflict", err)
	}
}

func TestTopicsSortedByName(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	for _, name := range []string{"zeta", "alpha", "Mid", "beta.1", "beta-2"} {
		if _, err := s.CreateTopic(ctx, Topic{Name: name, Partitions: 1, ReplicationFactor: 1}); err != nil {
			t.Fatalf("CreateTopic %q: %v", name, err)
		}
	}
	topics, err := s.Topics(ctx)
	if err != nil {
		t.Fatalf("Topics: %v", err)
	}
	var names []string
	for _, tp := range topics {
		names = append(names, tp.Name)
	}
	if got, want := strings.Join(names, ","), "Mid,alpha,beta-2,beta.1,zeta"; got != want {
		t.Errorf("Topics order %s, want %s", got, want)
	}
}

func TestDeleteTopicRemovesPartitionState(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	tp, err := s.CreateTopic(ctx, Topic{Name: "parts", Partitions: 2, ReplicationFactor: 1})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	for _, n := range []string{"0", "1"} {
		if _, err := s.Client().Put(ctx, s.partitionsPrefix(tp.ID)+n, `{"v":1}`); err != nil {
			t.Fatalf("put partition state: %v", err)
		}
	}
	if _, err := s.DeleteTopic(ctx, "parts"); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	resp, err := s.Client().Get(ctx, s.Prefix()+"partitions/", withPrefix())
	if err != nil {
		t.Fatalf("get partitions: %v", err)
	}
	if len(resp.Kvs) != 0 {
		t.Errorf("%d partition keys left after delete", len(resp.Kvs))
	}
}

func TestDecodeTopic(t *testing.T) {
	const id = `"6ba7b810-9dad-11d1-80b4-00c04fd430c8"`
	tests := []struct {
		name  string
		value string
		want  error
	}{
		{"valid", `{"v":1,"name":"t","id":` + id + `,"partitions":1,"replication_factor":1}`, nil},
		{"newer version", `{"v":2,"name":"t","id":` + id + `,"partitions":1,"replication_factor":1}`, ErrUnknownVersion},
		{"no version", `{"name":"t","id":` + id + `,"partitions":1,"replication_factor":1}`, ErrCorrupt},
		{"not json", `{"v":1,`, ErrCorrupt},
		{"name mismatch", `{"v":1,"name":"u","id":` + id + `,"partitions":1,"replication_factor":1}`, ErrCorrupt},
		{"zero id", `{"v":1,"name":"t","id":"00000000-0000-0000-0000-000000000000","partitions":1,"replication_factor":1}`, ErrCorrupt},
		{"no partitions", `{"v":1,"name":"t","id":` + id + `,"replication_factor":1}`, ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeTopic("t", &mvccpb.KeyValue{Key: []byte("/sluice/topics/t"), Value: []byte(tt.value), ModRevision: 5})
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("decodeTopic: got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestEncodeDecodeTopicRoundTrip(t *testing.T) {
	in := Topic{Name: "rt", ID: newKafkaUUID(), Partitions: 7, ReplicationFactor: 3,
		Configs: map[string]string{"retention.ms": "-1"}, Revision: 9}
	b, err := encodeTopic(in)
	if err != nil {
		t.Fatalf("encodeTopic: %v", err)
	}
	if !strings.Contains(string(b), `"v":1`) {
		t.Errorf("encoded topic %s lacks \"v\":1", b)
	}
	out, err := decodeTopic("rt", &mvccpb.KeyValue{Value: b, ModRevision: 9})
	if err != nil {
		t.Fatalf("decodeTopic: %v", err)
	}
	assertSameTopic(t, out, in)
}

func TestValidateTopicName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"orders", true},
		{"a.b_c-D9", true},
		{strings.Repeat("x", 249), true},
		{strings.Repeat("x", 250), false},
		{"", false},
		{".", false},
		{"..", false},
		{"a/b", false},
		{"a b", false},
		{"ü", false},
	}
	for _, tt := range tests {
		t.Run(tt.name[:min(len(tt.name), 20)], func(t *testing.T) {
			err := ValidateTopicName(tt.name)
			if (err == nil) != tt.ok {
				t.Fatalf("ValidateTopicName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidTopic) {
				t.Errorf("error %v is not ErrInvalidTopic", err)
			}
		})
	}
}
