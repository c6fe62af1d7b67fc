package tier

// probe.go owns the access checks of an object store, run before it is
// trusted: Probe, which the broker runs until it passes (its readiness
// depends on it), proves every permission tiering needs with one small
// object of its own; CheckListable, which tierctl runs, proves only that
// the bucket can be listed and writes nothing.
//
// Invariant: the probe writes only under ProbePrefix, never a key ParseKey
// accepts, so the scrub and tierctl diff never take it for an object of a
// partition (a probe left by a crash shows as a foreign key, and the next
// probe of the same broker replaces and deletes it).

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/tier/objstore"
)

// ProbePrefix is where probe objects live in the bucket.
const ProbePrefix = "sluice-probe/"

// ProbeKey is the probe object of one broker: one per broker, so brokers
// sharing a bucket never delete each other's probe while it is read.
func ProbeKey(nodeID int32) string { return fmt.Sprintf("%sbroker-%d", ProbePrefix, nodeID) }

// errStopList ends a List after its first key.
var errStopList = errors.New("tier: enough keys")

// CheckListable lists at most one key of the store: it fails when the
// store cannot be reached, the bucket does not exist or the credentials may
// not list it.
func CheckListable(ctx context.Context, s objstore.Store) error {
	err := s.List(ctx, "", func(objstore.Info) error { return errStopList })
	if err != nil && !errors.Is(err, errStopList) {
		return fmt.Errorf("list: %w", err)
	}
	return nil
}

// Probe writes a small object at key, reads it back, lists its prefix and
// deletes it: every operation tiering needs (upload, read, scrub, retention)
// once. A store that passes can be written by these credentials.
func Probe(ctx context.Context, s objstore.Store, key string) error {
	body := []byte("sluice object store probe\n")
	if err := s.Put(ctx, key, body); err != nil {
		return fmt.Errorf("write a probe object: %w", err)
	}
	got, err := s.Get(ctx, key, 0, -1)
	if err != nil {
		return fmt.Errorf("read the probe object back: %w", err)
	}
	if !bytes.Equal(got, body) {
		return fmt.Errorf("read the probe object back: got %d bytes that differ from the %d written", len(got), len(body))
	}
	found := false
	if err := s.List(ctx, ProbePrefix, func(info objstore.Info) error {
		found = found || info.Key == key
		return nil
	}); err != nil {
		return fmt.Errorf("list the probe object: %w", err)
	}
	if !found {
		return fmt.Errorf("list the probe object: %s is missing from the listing", key)
	}
	if err := s.Delete(ctx, key); err != nil {
		return fmt.Errorf("delete the probe object: %w", err)
	}
	return nil
}
