package quota

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func TestShares(t *testing.T) {
	const k = ProducerByteRate
	cases := []struct {
		name    string
		demands map[string]Demand
		live    int
		want    map[string]float64 // tenant → share of key k for broker "1"
	}{
		{"alone", map[string]Demand{"1": {"a": {k: 500}}}, 1, map[string]float64{"a": 1}},
		{"only one with demand", map[string]Demand{"1": {"a": {k: 500}}, "2": {}, "3": {}}, 3, map[string]float64{"a": 1}},
		{"proportional", map[string]Demand{"1": {"a": {k: 300}}, "2": {"a": {k: 100}}}, 2, map[string]float64{"a": 0.75}},
		{"floor for new traffic", map[string]Demand{"1": {"a": {k: 1}}, "2": {"a": {k: 999}}, "3": {}}, 3, map[string]float64{"a": 1.0 / 6}},
		{"no demand here", map[string]Demand{"2": {"a": {k: 999}}}, 3, map[string]float64{"a": 1.0 / 6}},
		{"zero demand everywhere", map[string]Demand{"1": {"a": {k: 0}}, "2": {"a": {k: 0}}}, 2, map[string]float64{"a": 0.5}},
		{"tenants apart", map[string]Demand{"1": {"a": {k: 100}, "b": {k: 100}}, "2": {"b": {k: 300}}}, 2,
			map[string]float64{"a": 1, "b": 0.25}},
		{"garbage ignored", map[string]Demand{"1": {"a": {k: math.NaN()}}, "2": {"a": {k: math.Inf(1)}}}, 2, map[string]float64{"a": 0.5}},
		{"live below the publishers", map[string]Demand{"1": {"a": {k: 1}}, "2": {"a": {k: 1}}, "3": {"a": {k: 1}}, "4": {"a": {k: 1}}}, 1,
			map[string]float64{"a": 0.25}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Shares("1", c.demands, c.live, nil)
			for tenant, want := range c.want {
				s, ok := got[tenant][k]
				if !ok || math.Abs(s-want) > 1e-9 {
					t.Errorf("tenant %s: share %v (present %v), want %v", tenant, s, ok, want)
				}
			}
		})
	}
	// With the cluster-wide limit known the split is max-min fair: a
	// broker asking less than an equal part gets what it asks, the rest is
	// shared equally by those asking more.
	limit := func(tenant, key string) (float64, bool) { return 600, tenant == "a" && key == k }
	maxMin := []struct {
		name    string
		demands map[string]Demand
		want    map[string]float64 // broker → its share of a's key k
	}{
		{"under the limit: in proportion", map[string]Demand{"1": {"a": {k: 100}}, "2": {"a": {k: 300}}},
			map[string]float64{"1": 0.25, "2": 0.75}},
		{"over: the small one whole, the rest equal", map[string]Demand{"1": {"a": {k: 100}}, "2": {"a": {k: 800}}, "3": {"a": {k: 400}}},
			map[string]float64{"1": 100.0 / 600, "2": 250.0 / 600, "3": 250.0 / 600}},
		{"over: all ask more than a third", map[string]Demand{"1": {"a": {k: 250}}, "2": {"a": {k: 500}}, "3": {"a": {k: 500}}},
			map[string]float64{"1": 1.0 / 3, "2": 1.0 / 3, "3": 1.0 / 3}},
		{"the coupled client's swing", map[string]Demand{"1": {"a": {k: 1.25 * 120}}, "2": {"a": {k: 240}}, "3": {"a": {k: 240}}},
			map[string]float64{"1": 150.0 / 600, "2": 225.0 / 600, "3": 225.0 / 600}},
	}
	for _, c := range maxMin {
		t.Run(c.name, func(t *testing.T) {
			var sum float64
			for broker, want := range c.want {
				s := Shares(broker, c.demands, 3, limit)["a"][k]
				sum += s
				if math.Abs(s-want) > 1e-9 {
					t.Errorf("broker %s: share %v, want %v", broker, s, want)
				}
			}
			if math.Abs(sum-1) > 1e-9 {
				t.Errorf("the shares sum to %v, want 1", sum)
			}
		})
	}
	if d := DefaultShare(4); d != 0.25 {
		t.Errorf("DefaultShare(4) = %v", d)
	}
}

// splitClient is a client of one broker that sends as fast as it is let
// while it is active.
type splitClient struct {
	broker     int // -1: one client over all three brokers in turn (coupled)
	from, till time.Duration
	next       time.Time
	turn       int // the coupled client's next broker
}

// TestSplitThreeBrokers: a tenant's producer_byte_rate split among three
// brokers while its traffic moves (one broker, then two, then a third
// alone, then all three), each client as fast as it is let, the split
// recomputed every SplitPeriod from the demands the brokers published the
// period before: the cluster-wide rate over 60 s is the quota ±10%.
func TestSplitThreeBrokers(t *testing.T) {
	span := 60 * time.Second
	schedules := map[string][]*splitClient{
		"moves every 15-20s": {
			{broker: 0, from: 0, till: 20 * time.Second},
			{broker: 0, from: 20 * time.Second, till: 35 * time.Second},
			{broker: 1, from: 20 * time.Second, till: 35 * time.Second},
			{broker: 2, from: 35 * time.Second, till: 50 * time.Second},
			{broker: 0, from: 50 * time.Second, till: span},
			{broker: 1, from: 50 * time.Second, till: span},
			{broker: 2, from: 50 * time.Second, till: span},
		},
		"moves at 7, 41 and 47s": {
			{broker: 0, from: 0, till: 7 * time.Second},
			{broker: 0, from: 7 * time.Second, till: 41 * time.Second},
			{broker: 1, from: 7 * time.Second, till: 41 * time.Second},
			{broker: 2, from: 41 * time.Second, till: 47 * time.Second},
			{broker: 0, from: 47 * time.Second, till: span},
			{broker: 1, from: 47 * time.Second, till: span},
			{broker: 2, from: 47 * time.Second, till: span},
		},
	}
	for name, clients := range schedules {
		t.Run(name, func(t *testing.T) { splitThreeBrokers(t, span, clients) })
	}
}

// TestSplitCoupledClient: one producer whose records go to the three
// brokers in turn, as a producer over partitions led by all three does
// when its buffer fills with records for a broker that holds it: the
// slowest broker paces the others. After 20 s on one broker alone, its
// traffic spreads over all three; the split must converge to equal shares
// (a proportional split oscillated there and let it have about 72% of the
// quota). Over the 40 s after the spread the rate is the quota ±10%.
func TestSplitCoupledClient(t *testing.T) {
	span := 60 * time.Second
	splitThreeBrokersFrom(t, span, 20*time.Second, []*splitClient{
		{broker: 0, from: 0, till: 20 * time.Second},
		{broker: -1, from: 20 * time.Second, till: span},
	})
}

func splitThreeBrokers(t *testing.T, span time.Duration, clients []*splitClient) {
	splitThreeBrokersFrom(t, span, 0, clients)
}

// splitThreeBrokersFrom runs clients against three brokers' meters for
// span and checks the cluster-wide rate from measureFrom to span.
func splitThreeBrokersFrom(t *testing.T, span, measureFrom time.Duration, clients []*splitClient) {
	const quota, req = 300 << 10, 16 << 10
	src := Static{"a": {ProducerByteRate: quota}}
	var meters []*Meters
	for range 3 {
		meters = append(meters, NewMeters(src, 0, nil))
	}
	for _, c := range clients {
		c.next = epoch.Add(c.from)
	}
	var accepted float64
	perPeriod := map[time.Duration]float64{}
	var published map[string]Demand // as read by every broker: one period old
	tick := epoch.Add(SplitPeriod)
	for {
		var first *splitClient
		for _, c := range clients {
			if c.next.Sub(epoch) < c.till && (first == nil || c.next.Before(first.next)) {
				first = c
			}
		}
		if first == nil || !first.next.Before(tick) {
			if tick.Sub(epoch) >= span {
				break
			}
			// Each broker splits by what was published the period before,
			// then publishes what it measured in this one.
			fresh := map[string]Demand{}
			for i, m := range meters {
				if published != nil {
					m.SetShares(Shares(fmt.Sprint(i), published, len(meters), m.Limit), DefaultShare(len(meters)))
				}
				fresh[fmt.Sprint(i)] = m.TakeUsage(SplitPeriod)
			}
			published = fresh
			tick = tick.Add(SplitPeriod)
			continue
		}
		to := first.broker
		if to < 0 {
			// One producer over partitions on every broker: its records go
			// to each in turn, and a broker that holds it holds them all.
			to, first.turn = first.turn, (first.turn+1)%len(meters)
		}
		d := meters[to].Record("a", ProducerByteRate, req, first.next)
		if first.next.Sub(epoch) >= measureFrom {
			accepted += req
		}
		perPeriod[first.next.Sub(epoch)/SplitPeriod] += req
		first.next = first.next.Add(max(d, time.Microsecond))
	}
	for p := range span / SplitPeriod {
		t.Logf("period %2d: %.0f bytes/s", p, perPeriod[p]/SplitPeriod.Seconds())
	}
	within(t, "cluster-wide bytes/s", accepted/(span-measureFrom).Seconds(), quota, 0.10)
}
