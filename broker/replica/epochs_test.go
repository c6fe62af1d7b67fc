package replica

import (
	"testing"

	"github.com/sluice-mq/sluice/wal"
)

func TestDivergesWithoutAFollowerEpoch(t *testing.T) {
	chain := []EpochEntry{{Epoch: 1, Start: 0}, {Epoch: 3, Start: 500}}
	cases := []struct {
		name      string
		offset    wal.Offset
		lastEpoch wal.Epoch
		want      bool
	}{
		{"empty log at 0", 0, -1, false},
		{"empty log restarted at 700 (no batch, no epoch)", 700, -1, false},
		{"same epoch, inside", 600, 3, false},
		{"older epoch past its end", 600, 1, true},
		{"unknown epoch 2", 450, 2, true},
	}
	for _, tc := range cases {
		if got, _, _ := diverges(chain, 1000, tc.offset, tc.lastEpoch); got != tc.want {
			t.Errorf("%s: diverges = %v, want %v", tc.name, got, tc.want)
		}
	}
}
