package cluster

// wire.go owns what the Cluster learns over the network: /readyz, Metadata
// (leaders, epochs, the controller, the registered brokers) through one
// franz-go client pinned to each broker, and /metrics parsed into series.
// Cluster.mu guards the pinned clients.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrNoBrokerUp is returned when every broker is killed or paused.
var ErrNoBrokerUp = errors.New("chaos/cluster: no broker is up")

// ErrNoController is returned while a broker names no controller.
var ErrNoController = errors.New("chaos/cluster: no controller")

// readyz asks broker b for GET /readyz and returns nil on 200.
func (c *Cluster) readyz(ctx context.Context, b *Broker) error {
	body, err := c.httpGet(ctx, "http://"+b.HTTPAddr+"/readyz")
	if err != nil {
		return fmt.Errorf("broker %d: %w", b.ID, err)
	}
	_ = body.Close()
	return nil
}

// httpGet returns the body of a 200 answer; the caller closes it.
func (c *Cluster) httpGet(ctx context.Context, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		_ = resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s %s", url, resp.Status, strings.TrimSpace(string(msg)))
	}
	return resp.Body, nil
}

// client is the franz-go client pinned to broker id: its requests go to
// that broker alone, never retried elsewhere.
func (c *Cluster) client(id int32) (*kgo.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[id]; ok {
		return cl, nil
	}
	b := c.brokers[id-1]
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(b.KafkaAddr),
		kgo.ClientID(fmt.Sprintf("sluice-chaos-cluster-%d", id)),
		kgo.RequestRetries(0),
	)
	if err != nil {
		return nil, fmt.Errorf("chaos/cluster: client of broker %d: %w", id, err)
	}
	c.clients[id] = cl
	return cl, nil
}

// closeClients closes every pinned client.
func (c *Cluster) closeClients() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, cl := range c.clients {
		cl.Close()
		delete(c.clients, id)
	}
}

// metadata asks broker id for the metadata of the given topics (none: no
// topic, only brokers and the controller).
func (c *Cluster) metadata(ctx context.Context, id int32, topics ...string) (*kmsg.MetadataResponse, error) {
	cl, err := c.client(id)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // empty, not null: no topics rather than all
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("metadata from broker %d: %w", id, err)
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// fromAnyUp calls ask on each broker that is up, in id order, until one
// answers; the errors of those that did not are joined.
func (c *Cluster) fromAnyUp(ask func(id int32) error) error {
	up := c.Up()
	if len(up) == 0 {
		return ErrNoBrokerUp
	}
	var errs []error
	for _, id := range up {
		err := ask(id)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Leader is the leader and leader epoch of a partition as the first broker
// that is up (in id order) and answers Metadata reports it. The leader may
// be a broker that is down: the cluster has not noticed yet. A partition
// whose metadata carries an error comes back with leader -1 and the error
// (a kerr error, for errors.Is).
func (c *Cluster) Leader(ctx context.Context, topic string, partition int32) (leader, epoch int32, err error) {
	if err := c.enter(); err != nil {
		return -1, -1, err
	}
	defer c.life.RUnlock()
	leader, epoch = -1, -1
	err = c.fromAnyUp(func(id int32) error {
		md, err := c.metadata(ctx, id, topic)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(md.Topics, func(t kmsg.MetadataResponseTopic) bool { return t.Topic != nil && *t.Topic == topic })
		if i < 0 {
			return fmt.Errorf("broker %d: topic %s missing from its metadata", id, topic)
		}
		mt := md.Topics[i]
		if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
			return fmt.Errorf("broker %d: topic %s: %w", id, topic, err)
		}
		j := slices.IndexFunc(mt.Partitions, func(p kmsg.MetadataResponseTopicPartition) bool { return p.Partition == partition })
		if j < 0 {
			return fmt.Errorf("broker %d: %s/%d missing from its metadata", id, topic, partition)
		}
		mp := mt.Partitions[j]
		if err := kerr.ErrorForCode(mp.ErrorCode); err != nil && mp.Leader < 0 {
			return fmt.Errorf("broker %d: %s/%d: %w", id, topic, partition, err)
		}
		leader, epoch = mp.Leader, mp.LeaderEpoch
		return nil
	})
	if err != nil {
		return -1, -1, fmt.Errorf("chaos/cluster: leader of %s/%d: %w", topic, partition, err)
	}
	return leader, epoch, nil
}

// Controller is the controller id as the first broker that is up (in id
// order) and answers Metadata reports it; ErrNoController while it names
// none.
func (c *Cluster) Controller(ctx context.Context) (int32, error) {
	if err := c.enter(); err != nil {
		return -1, err
	}
	defer c.life.RUnlock()
	ctl := int32(-1)
	err := c.fromAnyUp(func(id int32) error {
		md, err := c.metadata(ctx, id)
		if err != nil {
			return err
		}
		if md.ControllerID < 0 {
			return fmt.Errorf("broker %d: %w", id, ErrNoController)
		}
		ctl = md.ControllerID
		return nil
	})
	if err != nil {
		return -1, fmt.Errorf("chaos/cluster: controller: %w", err)
	}
	return ctl, nil
}

// formed reports nil when every broker that is up lists every broker that
// is up as registered and names a controller.
func (c *Cluster) formed(ctx context.Context) error {
	up := c.Up()
	for _, id := range up {
		md, err := c.metadata(ctx, id)
		if err != nil {
			return err
		}
		var listed []int32
		for _, b := range md.Brokers {
			listed = append(listed, b.NodeID)
		}
		for _, want := range up {
			if !slices.Contains(listed, want) {
				return fmt.Errorf("broker %d lists brokers %v, not yet %d", id, listed, want)
			}
		}
		if md.ControllerID < 0 {
			return fmt.Errorf("broker %d: %w", id, ErrNoController)
		}
	}
	return nil
}

// Metrics reads broker id's GET /metrics. Keys are series as Series spells
// them: `name` or `name{a="x",b="y"}` with the labels sorted by name.
func (c *Cluster) Metrics(ctx context.Context, id int32) (map[string]float64, error) {
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.life.RUnlock()
	b, err := c.broker(id)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	body, err := c.httpGet(ctx, "http://"+b.HTTPAddr+"/metrics")
	if err != nil {
		return nil, fmt.Errorf("chaos/cluster: metrics of broker %d: %w", id, err)
	}
	defer func() { _ = body.Close() }()
	m, err := ParseMetrics(body)
	if err != nil {
		return nil, fmt.Errorf("chaos/cluster: metrics of broker %d: %w", id, err)
	}
	return m, nil
}

// ParseMetrics reads the Prometheus text exposition format into series →
// value; comments and blank lines are skipped, a timestamp is ignored.
func ParseMetrics(r io.Reader) (map[string]float64, error) {
	out := make(map[string]float64)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		key, v, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d %q: %w", n, line, err)
		}
		out[key] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}

type label struct{ name, quoted string } // quoted: the value with its quotes and escapes

// parseSample splits `name{a="x",b="y"} value [timestamp]`.
func parseSample(line string) (string, float64, error) {
	i := strings.IndexAny(line, "{ \t")
	if i <= 0 {
		return "", 0, errors.New("no value")
	}
	name, rest := line[:i], line[i:]
	var labels []label
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " \t,")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq <= 0 {
				return "", 0, errors.New("label without '='")
			}
			lname := strings.TrimSpace(rest[:eq])
			rest = strings.TrimLeft(rest[eq+1:], " \t")
			end := closingQuote(rest)
			if end < 0 {
				return "", 0, fmt.Errorf("label %s: unterminated value", lname)
			}
			labels = append(labels, label{lname, rest[:end+1]})
			rest = rest[end+1:]
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", 0, errors.New("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", 0, fmt.Errorf("value: %w", err)
	}
	return seriesKey(name, labels), v, nil
}

// closingQuote is the index of the quote that ends the quoted string s
// begins with, or -1.
func closingQuote(s string) int {
	if s == "" || s[0] != '"' {
		return -1
	}
	for j := 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return -1
}

// Series is the key Metrics gives the series of metric name with the
// labels given as name, value pairs: Series("sluice_x", "topic", "t",
// "partition", "0") is `sluice_x{partition="0",topic="t"}`.
func Series(name string, labelPairs ...string) string {
	var labels []label
	for i := 0; i+1 < len(labelPairs); i += 2 {
		labels = append(labels, label{labelPairs[i], `"` + escapeLabel(labelPairs[i+1]) + `"`})
	}
	return seriesKey(name, labels)
}

// escapeLabel escapes a label value as the exposition format does.
func escapeLabel(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}

func seriesKey(name string, labels []label) string {
	if len(labels) == 0 {
		return name
	}
	slices.SortFunc(labels, func(a, b label) int { return strings.Compare(a.name, b.name) })
	var sb strings.Builder
	sb.WriteString(name)
	sb.WriteByte('{')
	for i, l := range labels {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(l.name)
		sb.WriteByte('=')
		sb.WriteString(l.quoted)
	}
	sb.WriteByte('}')
	return sb.String()
}
