package meta

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
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

// TestCommitOffsetsIfFenced: a coordinator fenced by its election key
// commits while it holds it, over several transactions; once another is
// elected, its commits fail with ErrFenced and store nothing.
func TestCommitOffsetsIfFenced(t *testing.T) {
	s := openStore(t, smallTxnConfig(t))
	ctx := testContext(t)
	topic := newKafkaUUID()
	at := time.UnixMilli(1_767_000_000_000)
	commit := func(offset int64) []CommittedOffset {
		var out []CommittedOffset
		for p := range int32(10) { // three transactions of at most 4
			out = append(out, CommittedOffset{OffsetKey: OffsetKey{TopicID: topic, Partition: p},
				Topic: "t", Offset: offset, LeaderEpoch: -1, Generation: 1, CommitTime: at})
		}
		return out
	}
	stored := func() []string {
		got, err := s.GroupOffsets(ctx, DefaultTenant, "g")
		if err != nil {
			t.Fatalf("GroupOffsets: %v", err)
		}
		return sortedOffsets(got)
	}

	first, err := s.Campaign(ctx, 1, shortTTL)
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	if err := s.CommitOffsetsIf(ctx, DefaultTenant, "g", commit(5), first.IfLeader()); err != nil {
		t.Fatalf("CommitOffsetsIf while holding the fence: %v", err)
	}
	if got, want := stored(), sortedOffsets(commit(5)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
	if err := first.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	second, err := s.Campaign(ctx, 2, shortTTL)
	if err != nil {
		t.Fatalf("second Campaign: %v", err)
	}
	defer func() { _ = second.Resign(ctx) }()

	err = s.CommitOffsetsIf(ctx, DefaultTenant, "g", commit(9), first.IfLeader())
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("CommitOffsetsIf by the deposed coordinator = %v, want ErrFenced", err)
	}
	if !strings.Contains(err.Error(), "after 0 of 10") {
		t.Errorf("error %q does not say that none was stored", err)
	}
	if got, want := stored(), sortedOffsets(commit(5)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("a fenced commit changed the offsets: %v", got)
	}
	if err := s.CommitOffsetsIf(ctx, DefaultTenant, "g", commit(9), second.IfLeader()); err != nil {
		t.Fatalf("CommitOffsetsIf by the new coordinator: %v", err)
	}
	if got, want := stored(), sortedOffsets(commit(9)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stored %v, want %v", got, want)
	}

	many := make([]clientv3.Cmp, 5)
	for i := range many {
		many[i] = second.IfLeader()
	}
	if err := s.CommitOffsetsIf(ctx, DefaultTenant, "g", commit(10), many...); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("CommitOffsetsIf with more conditions than a transaction carries = %v, want ErrInvalidConfig", err)
	}
	bad := commit(11)
	bad[9].Partition = -1
	if err := s.CommitOffsetsIf(ctx, DefaultTenant, "g", bad, second.IfLeader()); !errors.Is(err, ErrInvalidPartitions) {
		t.Errorf("CommitOffsetsIf with a bad key = %v, want ErrInvalidPartitions", err)
	}
	if got, want := stored(), sortedOffsets(commit(9)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("a refused commit stored part of its offsets: %v", got)
	}
}
