package meta

import (
	"fmt"
	"sort"
	"testing"
	"time"
)

func TestOffsetsCommitReadDelete(t *testing.T) {
	cfg := embeddedConfig(t)
	s := openStore(t, cfg)
	ctx := testContext(t)
	topicA, topicB := newKafkaUUID(), newKafkaUUID()
	at := time.UnixMilli(1_767_000_000_000)

	// 300 partitions: more than one transaction's worth.
	var many []CommittedOffset
	for p := range int32(300) {
		many = append(many, CommittedOffset{OffsetKey: OffsetKey{TopicID: topicA, Partition: p},
			Topic: "a", Offset: int64(p) * 10, LeaderEpoch: 2, Metadata: "m", Generation: 7, CommitTime: at})
	}
	tests := []struct {
		name    string
		group   string
		offsets []CommittedOffset
	}{
		{"many partitions", "g1", many},
		{"slash in group id", "team/g2", []CommittedOffset{{OffsetKey: OffsetKey{TopicID: topicB, Partition: 0},
			Topic: "b", Offset: 5, LeaderEpoch: -1, Generation: -1, CommitTime: at}}},
		{"group whose name prefixes another", "g", []CommittedOffset{{OffsetKey: OffsetKey{TopicID: topicB, Partition: 1},
			Topic: "b", Offset: 9, LeaderEpoch: -1, Generation: 3, CommitTime: at}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.CommitOffsets(ctx, DefaultTenant, tc.group, tc.offsets); err != nil {
				t.Fatalf("CommitOffsets: %v", err)
			}
			got, err := s.GroupOffsets(ctx, DefaultTenant, tc.group)
			if err != nil {
				t.Fatalf("GroupOffsets: %v", err)
			}
			if fmt.Sprint(sortedOffsets(got)) != fmt.Sprint(sortedOffsets(tc.offsets)) {
				t.Fatalf("read back %d offsets, want %d:\n%v\n%v", len(got), len(tc.offsets), got, tc.offsets)
			}
		})
	}

	// A later commit replaces one partition's offset.
	upd := many[3]
	upd.Offset, upd.Generation = 999, 8
	if err := s.CommitOffsets(ctx, DefaultTenant, "g1", []CommittedOffset{upd}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteOffsets(ctx, DefaultTenant, "g1", []OffsetKey{many[0].OffsetKey, many[1].OffsetKey}); err != nil {
		t.Fatal(err)
	}

	// Everything survives a restart of the store.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, cfg)
	all, err := s2.TenantOffsets(ctx, DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || len(all["g1"]) != 298 || len(all["team/g2"]) != 1 || len(all["g"]) != 1 {
		t.Fatalf("after reopen: groups %d, g1 %d, team/g2 %d, g %d", len(all), len(all["g1"]), len(all["team/g2"]), len(all["g"]))
	}
	for _, o := range all["g1"] {
		if o.Partition == 3 && (o.Offset != 999 || o.Generation != 8 || !o.CommitTime.Equal(at)) {
			t.Fatalf("updated offset read back as %+v", o)
		}
	}
	if err := s2.DeleteGroupOffsets(ctx, DefaultTenant, "g"); err != nil {
		t.Fatal(err)
	}
	if got, err := s2.GroupOffsets(ctx, DefaultTenant, "g"); err != nil || len(got) != 0 {
		t.Fatalf("deleted group still has %v (%v)", got, err)
	}
	if got, _ := s2.GroupOffsets(ctx, DefaultTenant, "g1"); len(got) != 298 {
		t.Fatalf("deleting g touched g1: %d offsets left", len(got))
	}
	if got, _ := s2.GroupOffsets(ctx, "other", "g1"); len(got) != 0 {
		t.Fatalf("another tenant sees %d offsets", len(got))
	}
}

func TestOffsetsCorruptValue(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	id := newKafkaUUID()
	key := s.offsetKey(DefaultTenant, "g", OffsetKey{TopicID: id, Partition: 0})
	for _, tc := range []struct{ name, val string }{
		{"not json", "{"},
		{"newer version", `{"v":2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.client.Put(ctx, key, tc.val); err != nil {
				t.Fatal(err)
			}
			if _, err := s.GroupOffsets(ctx, DefaultTenant, "g"); err == nil {
				t.Fatal("corrupt offset read without error")
			}
		})
	}
}

func sortedOffsets(os []CommittedOffset) []string {
	out := make([]string, 0, len(os))
	for _, o := range os {
		out = append(out, fmt.Sprintf("%x/%d=%d,%d,%q,%d,%d,%s", o.TopicID, o.Partition, o.Offset, o.LeaderEpoch, o.Metadata, o.Generation, o.CommitTime.UnixMilli(), o.Topic))
	}
	sort.Strings(out)
	return out
}
