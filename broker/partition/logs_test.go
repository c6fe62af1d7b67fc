package partition

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/wal/vfs"
)

// A follower that truncates a divergent tail says so once at info, with
// what it removed (the wal's own line is debug).
func TestTruncationLoggedOnceAtInfo(t *testing.T) {
	var buf strings.Builder
	f := &truncationFixture{t: t, fs: vfs.NewMem(), log: zerolog.New(&buf).Level(zerolog.InfoLevel)}
	f.open()
	f.elect(1, 1)
	if r := appendOn(t, f.part, testBatch(3, 7, 0, 0, 1)); r.Err != nil { // offsets 0-2, never replicated
		t.Fatal(r.Err)
	}
	f.elect(2, 2)
	f.answerFetch(replica.Message{Diverging: true, DivergingEpoch: 1, DivergingEnd: 0})
	if end := f.part.log.EndOffset(); end != 0 {
		t.Fatalf("log end %d after the divergence, want 0", end)
	}
	var truncs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if strings.Contains(m["message"].(string), "truncated") {
			truncs = append(truncs, m)
		}
	}
	if len(truncs) != 1 {
		t.Fatalf("%d info lines about the truncation, want 1: %v", len(truncs), truncs)
	}
	if truncs[0]["offset"] != float64(0) || truncs[0]["old_end"] != float64(3) {
		t.Errorf("truncation line %v: want offset 0, old_end 3", truncs[0])
	}
}
