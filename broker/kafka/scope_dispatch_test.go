package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/kafka/scope"
)

// TestScopeCoversDispatch: every API the broker serves is in the scope
// stage's table up to the highest version served, so no request reaches a
// handler with names the stage did not see.
func TestScopeCoversDispatch(t *testing.T) {
	for key, a := range apis {
		if !scope.Covers(key, a.max) {
			t.Errorf("%s (%d) is served up to v%d but not scoped that far", kmsg.NameForKey(key), key, a.max)
		}
	}
}
