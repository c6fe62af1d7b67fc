package cluster

// drain.go owns what a rolling restart needs of the cluster: a clean stop
// of one broker (SIGTERM, as an operator's service manager sends it), an
// admin call to one named broker, and the broker listing one broker serves
// (GET /v1/brokers: liveness, drain marks and how many partitions each
// broker leads in its view).
//
// Invariant: a clean stop is an expected exit, never an unexpected one; a
// broker that does not exit 0 within its grace is killed and reported.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// TerminateGrace is how long Terminate waits after SIGTERM before SIGKILL:
// beyond a broker's controlled shutdown (--controlled-shutdown-timeout).
const TerminateGrace = 60 * time.Second

// Terminate stops broker id cleanly with SIGTERM and waits until it has
// exited; it returns an error unless it exited 0 within TerminateGrace.
func (c *Cluster) Terminate(id int32) error {
	return c.each([]int32{id}, "terminate", func(b *Broker) error { return b.proc.terminate(TerminateGrace) })
}

// BrokerState is one row of GET /v1/brokers.
type BrokerState struct {
	ID       int32 `json:"id"`
	Live     bool  `json:"live"`
	Draining bool  `json:"draining"`
	Leaders  int   `json:"leaders"`
}

// AdminOn sends an HTTP admin call (body JSON, or "") to broker via alone
// and succeeds on a 2xx answer.
func (c *Cluster) AdminOn(ctx context.Context, via int32, method, path, body string) error {
	b, err := c.broker(via)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+b.HTTPAddr+path, strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("chaos/cluster: %s %s: %w", method, path, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("chaos/cluster: %s %s on broker %d: %w", method, path, via, err)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("chaos/cluster: %s %s on broker %d: %s %s", method, path, via, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// Brokers is GET /v1/brokers as broker via answers it.
func (c *Cluster) Brokers(ctx context.Context, via int32) ([]BrokerState, error) {
	b, err := c.broker(via)
	if err != nil {
		return nil, err
	}
	body, err := c.httpGet(ctx, "http://"+b.HTTPAddr+"/v1/brokers")
	if err != nil {
		return nil, fmt.Errorf("chaos/cluster: brokers of broker %d: %w", via, err)
	}
	defer func() { _ = body.Close() }()
	var out struct {
		Brokers []BrokerState `json:"brokers"`
	}
	if err := json.NewDecoder(io.LimitReader(body, 1<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("chaos/cluster: brokers of broker %d: %w", via, err)
	}
	return out.Brokers, nil
}
