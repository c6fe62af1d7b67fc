package meta

import (
	"errors"
	"maps"
	"testing"
)

// A broker's per-listener addresses survive the registry, and a record
// written without them (a build before listeners) reads back with none.
func TestRegisterKeepsListeners(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	withListeners := testBroker(1)
	withListeners.Listeners = map[string]string{"PLAINTEXT": "127.0.0.1:9093", "SASL_SSL": "broker1.example:9094"}
	register(t, s, withListeners, 0)
	register(t, s, testBroker(2), 0)
	brokers, err := s.Brokers(testContext(t))
	if err != nil {
		t.Fatalf("Brokers: %v", err)
	}
	if len(brokers) != 2 {
		t.Fatalf("Brokers = %+v, want two", brokers)
	}
	if !maps.Equal(brokers[0].Listeners, withListeners.Listeners) {
		t.Errorf("listeners read back %v, want %v", brokers[0].Listeners, withListeners.Listeners)
	}
	if brokers[1].Listeners != nil {
		t.Errorf("a record without listeners read back %v, want none", brokers[1].Listeners)
	}
}

func TestValidateRefusesBadListenerAddress(t *testing.T) {
	for _, ls := range []map[string]string{{"SASL_SSL": ":9094"}, {"": "127.0.0.1:9094"}, {"SSL": "host"}} {
		b := testBroker(1)
		b.Listeners = ls
		if err := b.Validate(); !errors.Is(err, ErrInvalidBroker) {
			t.Errorf("Validate with listeners %v = %v, want ErrInvalidBroker", ls, err)
		}
	}
}
