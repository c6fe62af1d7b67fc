package e2e

// The broker's memory while large payloads stream through it: a real
// sluiced process on Versity's S3 gateway, ten 100 MB uploads at once
// through the broker's PUTs (not presigned URLs), its peak RSS read from
// /proc/<pid>/status (VmHWM).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/payload"
	"github.com/sluice-mq/sluice/tier/objstore/s3test"
)

// chachaReader is n deterministic bytes of seed.
type chachaReader struct {
	src  *rand.ChaCha8
	left int64
}

func newChacha(seed byte, n int64) *chachaReader {
	var s [32]byte
	s[0] = seed
	return &chachaReader{src: rand.NewChaCha8(s), left: n}
}

func (c *chachaReader) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, _ := c.src.Read(p)
	c.left -= int64(n)
	return n, nil
}

// TestLargePayloadBrokerRSS: ten 100 MB uploads stream through one sluiced
// process at once; its peak resident set (VmHWM, which counts its
// embedded etcd too) stays under 200 MB, and every upload completes with
// its SHA-256.
func TestLargePayloadBrokerRSS(t *testing.T) {
	if testing.Short() || os.Getenv("SLUICE_LARGE_RSS") == "" {
		t.Skip("set SLUICE_LARGE_RSS=1: streams 1 GB through a sluiced process and an S3 server (minutes)")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/<pid>/status")
	}
	srv := s3test.Start(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	b := startBroker(t, brokerOptions{extraArgs: []string{
		"--object-store", srv.URL(fmt.Sprintf("e2e-rss-%d", time.Now().UnixNano())),
	}})
	createTopic(t, newAdmin(t, b), "big", 1, nil)
	pid := b.pid()

	const size, uploads = int64(100_000_000), 10
	h := sha256.New()
	_, _ = io.Copy(h, newChacha(1, size))
	sum := hex.EncodeToString(h.Sum(nil))
	startHWM := procStatusKiB(t, pid, "VmHWM")

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, uploads)
	for i := range uploads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pc := &payload.Client{Base: "http://" + b.httpAddr, Options: payload.Options{SHA256: sum, Transfer: payload.TransferBroker}}
			r, err := pc.Upload(ctx, "big", newChacha(1, size), size)
			if err == nil && (r.Size != size || r.SHA256 != sum) {
				err = fmt.Errorf("completed %+v", r)
			}
			errs[i] = err
		}()
	}
	// Sample the resident set while they run (VmHWM is the peak anyway).
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var peakRSS int64
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-tick.C:
			peakRSS = max(peakRSS, procStatusKiB(t, pid, "VmRSS"))
		}
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("upload %d: %v", i, err)
		}
	}
	hwm := procStatusKiB(t, pid, "VmHWM")
	t.Logf("ten %d-byte uploads in %v: broker VmHWM %d KiB (%.1f MB; %d KiB before), sampled VmRSS peak %d KiB",
		size, time.Since(start).Round(time.Millisecond), hwm, float64(hwm)*1024/1e6, startHWM, peakRSS)
	if hwm*1024 >= 200_000_000 {
		t.Fatalf("the broker's peak RSS was %.1f MB, want under 200 MB", float64(hwm)*1024/1e6)
	}
}
