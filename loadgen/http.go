package loadgen

// This file owns the HTTP System: publishing through Sluice's HTTP API,
// POST /v1/topics/{topic}/messages:publish, so a run measures what an HTTP
// client sees, the forwarding to a partition's leader included when the
// URL names a broker that does not lead it.
//
//   - Setup creates the topic with POST /v1/topics (a topic that already
//     exists with the run's partition count is used as it is) and waits
//     until GET /v1/topics/{topic} shows a leader for every partition.
//   - A producer sends Config.HTTPBatch messages per request: keyed as the
//     scenario says, the payload as payload_base64, the scheduled send time
//     in the text header lg-ts. Each request runs on its own goroutine over
//     the producer's net/http client, whose keep-alive connections are
//     pooled. Each message is acknowledged from its own result in the
//     answer: "ok" or "duplicate" is an ack, any other status an error
//     named by that status. A batch that is not full waits for more
//     messages, for Config.Linger when that is set, or for Flush.
//   - Publishes carry no producer id, so Config.Idempotent does not apply:
//     requests run concurrently, and per-partition sequences could reach
//     the broker out of order. (The broker's own forwarding to a leader is
//     idempotent whatever the client does.)
//   - The HTTP API has no call that deletes a topic, so Teardown does
//     nothing: the topic stays.
//   - Consumers, when Config.Brokers names Kafka listeners, are the Kafka
//     System's; without them a run must have no consumers (Validate).
//
// Invariant: a producer has at most slots requests in flight
// (ceil(InFlight/HTTPBatch), at most maxHTTPRequests); Publish blocks while
// they are all taken.
// Invariant: every message Publish accepts gets exactly one done call,
// Close included.
//
// Goroutines: one per request in flight, started by send; Flush and Close
// wait for them (wg). A linger timer per partial batch when Linger > 0.
// The pending batch, the timer and closed are guarded by httpProducer.mu.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

const (
	// maxHTTPRequests caps a producer's concurrent requests (and so its
	// connections) whatever InFlight says.
	maxHTTPRequests = 128
	// httpRequestTimeout outlasts the broker's own publish deadline (30 s),
	// so a slow publish is answered by the broker, not cut by loadgen.
	httpRequestTimeout = time.Minute
	// maxHTTPAnswer bounds what loadgen reads of an answer.
	maxHTTPAnswer = 16 << 20
	httpSetupPoll = 50 * time.Millisecond
)

// errHTTPNoConsumers is returned for a consumer without Kafka brokers.
var errHTTPNoConsumers = errors.New("loadgen: http consumes over Kafka and no --brokers were given")

type httpSystem struct {
	cfg   Config
	log   zerolog.Logger
	base  string       // Config.HTTPURL without a trailing slash
	cl    *http.Client // setup calls
	kafka *kafkaSystem // consumers; nil without Config.Brokers
}

func newHTTPSystem(cfg Config, log zerolog.Logger) (*httpSystem, error) {
	s := &httpSystem{cfg: cfg, log: log, base: strings.TrimRight(cfg.HTTPURL, "/"),
		cl: &http.Client{Timeout: httpRequestTimeout}}
	if len(cfg.Brokers) > 0 {
		k, err := newKafkaSystem(cfg, log)
		if err != nil {
			return nil, err
		}
		s.kafka = k
	}
	return s, nil
}

func (s *httpSystem) Setup(ctx context.Context, topic string, partitions int) error {
	body, err := json.Marshal(map[string]any{
		"name": topic, "partitions": partitions, "replication_factor": s.cfg.ReplicationFactor,
	})
	if err != nil {
		return fmt.Errorf("loadgen: create topic %s: %w", topic, err)
	}
	status, answer, err := s.call(ctx, http.MethodPost, "/v1/topics", body)
	switch {
	case err != nil:
		return fmt.Errorf("loadgen: create topic %s: %w", topic, err)
	case status == http.StatusConflict:
		s.log.Info().Str("topic", topic).Msg("the topic exists; using it")
	case status != http.StatusCreated:
		return fmt.Errorf("loadgen: create topic %s: %w", topic, httpError(status, answer))
	}
	for {
		ready, err := s.topicReady(ctx, topic, partitions)
		if err != nil {
			return err
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("loadgen: wait for topic %s: %w", topic, ctx.Err())
		case <-time.After(httpSetupPoll):
		}
	}
}

// topicReady reports whether the topic has its partitions, each with a
// leader. A topic with another partition count is an error: it exists from
// an earlier run, and the HTTP API cannot delete it.
func (s *httpSystem) topicReady(ctx context.Context, topic string, partitions int) (bool, error) {
	status, answer, err := s.call(ctx, http.MethodGet, "/v1/topics/"+url.PathEscape(topic), nil)
	if err != nil || status != http.StatusOK {
		return false, nil // not yet known to this broker (or not answering): ask again
	}
	var d struct {
		Partitions []struct {
			Leader int32 `json:"leader"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(answer, &d); err != nil {
		return false, fmt.Errorf("loadgen: describe topic %s: %w", topic, err)
	}
	if n := len(d.Partitions); n > 0 && n != partitions {
		return false, fmt.Errorf("loadgen: topic %s exists with %d partitions, the run wants %d: choose another --topic or --partitions %d",
			topic, n, partitions, n)
	}
	ready := len(d.Partitions) == partitions
	for _, p := range d.Partitions {
		ready = ready && p.Leader >= 0
	}
	return ready, nil
}

// call makes one request to the HTTP API and returns its status and body.
func (s *httpSystem) call(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.cl.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPAnswer))
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	return resp.StatusCode, answer, nil
}

// httpError describes an HTTP error answer; its last ": " part is the
// status and the API's error code, which the report counts errors by.
func httpError(status int, answer []byte) error {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(answer, &e) == nil && e.Error.Code != "" {
		return fmt.Errorf("%s: HTTP %d %s", e.Error.Message, status, e.Error.Code)
	}
	text := strings.TrimSpace(string(answer))
	if len(text) > 200 {
		text = text[:200]
	}
	return fmt.Errorf("%q: HTTP %d", text, status)
}

func (s *httpSystem) GroupsSupported(ctx context.Context) (bool, error) {
	if s.kafka == nil {
		return false, nil
	}
	return s.kafka.GroupsSupported(ctx)
}

func (s *httpSystem) OrderedPartitions() bool { return true }

func (s *httpSystem) NewConsumer(ctx context.Context, spec ConsumerSpec) (Consumer, error) {
	if s.kafka == nil {
		return nil, errHTTPNoConsumers
	}
	return s.kafka.NewConsumer(ctx, spec)
}

// Teardown does nothing: the HTTP API cannot delete a topic.
func (s *httpSystem) Teardown(context.Context, string) error {
	s.log.Debug().Msg("the HTTP API has no topic deletion; the topic stays")
	return nil
}

func (s *httpSystem) Close() {
	s.cl.CloseIdleConnections()
	if s.kafka != nil {
		s.kafka.Close()
	}
}

func (s *httpSystem) NewProducer(_ context.Context, _ int) (Producer, error) {
	slots := min((s.cfg.InFlight+s.cfg.HTTPBatch-1)/s.cfg.HTTPBatch, maxHTTPRequests)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = slots, slots // every request slot keeps its connection
	ctx, cancel := context.WithCancel(context.Background())
	return &httpProducer{
		cl:     &http.Client{Transport: tr, Timeout: httpRequestTimeout},
		url:    s.base + "/v1/topics/" + url.PathEscape(s.cfg.Topic) + "/messages:publish",
		batch:  s.cfg.HTTPBatch,
		linger: s.cfg.Linger,
		slots:  make(chan struct{}, slots),
		ctx:    ctx,
		cancel: cancel,
	}, nil
}

type httpProducer struct {
	cl     *http.Client
	url    string
	batch  int
	linger time.Duration
	slots  chan struct{}   // one per request in flight
	ctx    context.Context // the requests'; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // batches taken whose answers are not handled yet

	mu      sync.Mutex
	pending []httpPending // guarded by mu: the batch being filled
	timer   *time.Timer   // guarded by mu: sends pending after linger
	gen     uint64        // guarded by mu: counts batches taken, so a late timer leaves the next alone
	closed  bool          // guarded by mu
}

// httpPending is one accepted message: its JSON object in the request and
// its callback.
type httpPending struct {
	entry []byte
	done  AckFunc
}

// httpMessage is one message of a publish request.
type httpMessage struct {
	MessageKey    *string           `json:"message_key,omitempty"`
	PayloadBase64 []byte            `json:"payload_base64"` // encoding/json writes []byte as standard base64
	Headers       map[string]string `json:"headers"`
	TimestampMs   int64             `json:"timestamp_ms"`
}

func (p *httpProducer) Publish(ctx context.Context, msg *Message, done AckFunc) error {
	m := httpMessage{
		PayloadBase64: msg.Value,
		Headers:       map[string]string{HeaderTimestamp: strconv.FormatInt(msg.Scheduled.UnixNano(), 10)},
		TimestampMs:   msg.Scheduled.UnixMilli(),
	}
	if msg.Key != nil {
		k := string(msg.Key)
		m.MessageKey = &k
	}
	entry, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("loadgen: http publish: encode: %w", err)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errProducerClosed
	}
	p.pending = append(p.pending, httpPending{entry: entry, done: done})
	var full []httpPending
	if len(p.pending) >= p.batch {
		full = p.takeLocked()
	} else if len(p.pending) == 1 && p.linger > 0 {
		gen := p.gen
		p.timer = time.AfterFunc(p.linger, func() { p.lingered(gen) })
	}
	p.mu.Unlock()
	if full != nil {
		p.send(ctx, full)
	}
	return nil
}

// takeLocked hands the pending batch to the caller, who must send it, and
// counts it in wg while the producer is open, so Close waits for it.
func (p *httpProducer) takeLocked() []httpPending {
	out := p.pending
	p.pending = make([]httpPending, 0, p.batch)
	p.gen++
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.wg.Add(1)
	return out
}

// lingered sends the partial batch the timer of generation gen was set for.
func (p *httpProducer) lingered(gen uint64) {
	p.mu.Lock()
	if p.closed || p.gen != gen || len(p.pending) == 0 {
		p.mu.Unlock()
		return
	}
	full := p.takeLocked()
	p.mu.Unlock()
	p.send(p.ctx, full)
}

// send waits for a request slot (while ctx lasts) and starts the request.
// A batch that gets no slot fails through its callbacks.
func (p *httpProducer) send(ctx context.Context, batch []httpPending) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		failAll(batch, fmt.Errorf("loadgen: http publish: %w", ctx.Err()))
		p.wg.Done()
		return
	case <-p.ctx.Done():
		failAll(batch, errProducerClosed)
		p.wg.Done()
		return
	}
	go func() {
		defer p.wg.Done()
		defer func() { <-p.slots }()
		p.roundTrip(batch)
	}()
}

func failAll(batch []httpPending, err error) {
	for _, m := range batch {
		m.done(err)
	}
}

// roundTrip publishes one batch and calls each message's callback.
func (p *httpProducer) roundTrip(batch []httpPending) {
	size := len(`{"messages":[]}`) + len(batch)
	for _, m := range batch {
		size += len(m.entry)
	}
	body := make([]byte, 0, size)
	body = append(body, `{"messages":[`...)
	for i, m := range batch {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, m.entry...)
	}
	body = append(body, "]}"...)
	req, err := http.NewRequestWithContext(p.ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		failAll(batch, fmt.Errorf("loadgen: http publish: %w", err))
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.cl.Do(req)
	if err != nil {
		failAll(batch, fmt.Errorf("loadgen: http publish: %w", err))
		return
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPAnswer))
	_ = resp.Body.Close() // read to the end, so the connection is reused
	if err != nil {
		failAll(batch, fmt.Errorf("loadgen: http publish: read the answer: %w", err))
		return
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusMultiStatus {
		failAll(batch, fmt.Errorf("loadgen: http publish: %w", httpError(resp.StatusCode, answer)))
		return
	}
	var ans struct {
		Results []struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal(answer, &ans); err != nil {
		failAll(batch, fmt.Errorf("loadgen: http publish: decode the answer: %w", err))
		return
	}
	if len(ans.Results) != len(batch) {
		failAll(batch, fmt.Errorf("loadgen: http publish: %d results for %d messages", len(ans.Results), len(batch)))
		return
	}
	for i, r := range ans.Results {
		switch r.Status {
		case "ok", "duplicate":
			batch[i].done(nil)
		default:
			batch[i].done(fmt.Errorf("loadgen: http publish refused (%s): %s", r.Error, r.Status))
		}
	}
}

// Flush sends the partial batch and waits until every request is answered.
func (p *httpProducer) Flush(ctx context.Context) error {
	p.mu.Lock()
	var full []httpPending
	if len(p.pending) > 0 && !p.closed {
		full = p.takeLocked()
	}
	p.mu.Unlock()
	if full != nil {
		p.send(ctx, full)
	}
	flushed := make(chan struct{})
	go func() { p.wg.Wait(); close(flushed) }() // ends once every taken batch is handled
	select {
	case <-flushed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("loadgen: flush: %w", ctx.Err())
	}
}

// Close cancels the requests in flight, fails what was not sent and waits
// for every callback. It must not run concurrently with Publish.
func (p *httpProducer) Close() {
	p.mu.Lock()
	p.closed = true
	pending := p.pending
	p.pending = nil
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.mu.Unlock()
	failAll(pending, errProducerClosed)
	p.cancel()
	p.wg.Wait()
	p.cl.CloseIdleConnections()
}
