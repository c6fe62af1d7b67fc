package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every API a client listener serves has a rule in the authorise stage's
// table: an API added without one would be served to whoever asks.
func TestEveryAPIHasAnAuthzRule(t *testing.T) {
	for key := range apis {
		if _, ok := authzRules[key]; !ok {
			t.Errorf("api %s (%d) has no authorise rule in authzRules", kmsg.NameForKey(key), key)
		}
	}
	for key := range authzRules {
		if _, ok := apis[key]; !ok {
			t.Errorf("authzRules has a rule for %s (%d), which is not served", kmsg.NameForKey(key), key)
		}
	}
}

// Only ApiVersions and the SASL exchange pass before authentication.
func TestPreAuthAPIs(t *testing.T) {
	for key := range apis {
		want := key == 17 || key == 18 || key == 36
		if got := preAuthAPI(key); got != want {
			t.Errorf("preAuthAPI(%s) = %v, want %v", kmsg.NameForKey(key), got, want)
		}
	}
}
