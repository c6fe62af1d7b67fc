package tier

import (
	"context"
	"testing"

	"github.com/sluice-mq/sluice/meta"
)

// TestRemoteBytesBelow: the head's objects above the log start count by
// their sizes, the offsets only manifests cover are estimated at the head's
// bytes per offset, and what the caller holds locally (from below on) is
// not counted twice.
func TestRemoteBytesBelow(t *testing.T) {
	m := &Manager{parts: make(map[partKey]*partState)}
	id := [16]byte{1}
	// Log start 100; manifests cover [100, 300); the head names [300, 400)
	// in two objects of 500 bytes each (10 bytes per offset).
	m.setHead(meta.RemoteHead{TopicID: id, Partition: 0, V: 1, LogStart: 100, RemoteEnd: 400, Revision: 1,
		Objects: []meta.RemoteObject{
			{Key: "gone", Base: 0, Next: 100, Size: 9999}, // below the log start: retention freed it
			{Key: "a", Base: 300, Next: 350, Size: 500},
			{Key: "b", Base: 350, Next: 400, Size: 500},
		}})
	cases := []struct {
		below int64
		want  int64
	}{
		{1 << 40, 1000 + 200*1000/100}, // nothing local below: all of it
		{350, 500 + 200*500/50},        // local from 350 on: object b is local
		{100, 0},                       // all local
		{50, 0},
	}
	for _, c := range cases {
		got, err := m.RemoteBytesBelow(context.Background(), id, 0, c.below)
		if err != nil || got != c.want {
			t.Errorf("RemoteBytesBelow(below %d) = %d, %v; want %d", c.below, got, err, c.want)
		}
	}
}
