package e2e

// A 100 MB payload through the Go helper and franz-go against a real
// sluiced process on Versity's S3 gateway: payload.Client.Put uploads it
// and publishes the envelope with a franz-go producer, a franz-go consumer
// reads the envelope, and payload.Client.Open streams the object back,
// verifying its SHA-256 as it reads.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/payload"
	"github.com/sluice-mq/sluice/tier/objstore/s3test"
)

// TestLargePayloadGoHelperRoundTrip: Put, consume, Open of one 100 MB
// payload; the log carries only the envelope, and the bytes read back have
// the payload's size and SHA-256.
func TestLargePayloadGoHelperRoundTrip(t *testing.T) {
	if testing.Short() || os.Getenv("SLUICE_LARGE_RSS") == "" {
		t.Skip("set SLUICE_LARGE_RSS=1: streams 100 MB each way through a sluiced process and an S3 server")
	}
	srv := s3test.Start(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	b := startBroker(t, brokerOptions{extraArgs: []string{
		"--object-store", srv.URL(fmt.Sprintf("e2e-helper-%d", time.Now().UnixNano())),
	}})
	createTopic(t, newAdmin(t, b), "big", 1, nil)

	const size = int64(100_000_000)
	h := sha256.New()
	_, _ = io.Copy(h, newChacha(2, size))
	sum := hex.EncodeToString(h.Sum(nil))

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	pc := &payload.Client{Base: "http://" + b.httpAddr, Options: payload.Options{SHA256: sum}}
	r, err := pc.Put(ctx, newClient(t, b), "big", []byte("k"), newChacha(2, size), size)
	if err != nil {
		t.Fatalf("payload.Put: %v", err)
	}
	if r.Size != size || r.SHA256 != sum {
		t.Fatalf("reference %+v, want size %d sha256 %s", r, size, sum)
	}

	consumer := newClient(t, b, kgo.ConsumeTopics("big"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var rec *kgo.Record
	for rec == nil {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		fs.EachRecord(func(x *kgo.Record) { rec = x })
	}
	if len(rec.Value) > 1024 {
		t.Fatalf("the envelope carries %d bytes of value; the payload must not travel in the log", len(rec.Value))
	}
	rc, err := pc.Open(ctx, rec)
	if err != nil {
		t.Fatalf("payload.Open: %v", err)
	}
	defer rc.Close()
	back := sha256.New()
	n, err := io.Copy(back, rc)
	if err != nil {
		t.Fatalf("read the payload back after %d bytes: %v", n, err)
	}
	if got := hex.EncodeToString(back.Sum(nil)); n != size || got != sum {
		t.Fatalf("read %d bytes with sha256 %s, want %d with %s", n, got, size, sum)
	}
}
