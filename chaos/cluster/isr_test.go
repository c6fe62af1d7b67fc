package cluster

import "testing"

func TestPartitionSyncInSync(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    PartitionSync
		want bool
	}{
		{"all in sync", PartitionSync{Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{3, 1, 2}}, true},
		{"one missing", PartitionSync{Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}, false},
		{"no leader", PartitionSync{Leader: -1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, false},
		{"no replicas known", PartitionSync{Leader: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.InSync(); got != tc.want {
				t.Errorf("InSync() = %v, want %v", got, tc.want)
			}
		})
	}
}
