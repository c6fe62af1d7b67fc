package broker

// The console's cluster page (issue 23) against a real three-broker
// cluster: every live broker's row carries that broker's own etcd round
// trip, disk-watermark level and fsync latency (asked of it through
// GET /v1/brokers/{id}/health, over the inter-broker listener), and a
// broker that stops answering while its registration is still live is
// shown unreachable within the timeout instead of hanging the page.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/node"
)

// freezableProxy relays TCP connections to a target until it is frozen;
// from then on it cuts the connections it relayed and holds new ones open
// without a byte of answer, as a hung or cut-off broker whose lease has not
// run out yet does.
type freezableProxy struct {
	ln     net.Listener
	target atomic.Pointer[string]
	frozen atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn // guarded by mu: every conn accepted or dialled
	wg     sync.WaitGroup
}

func startFreezableProxy(t *testing.T) *freezableProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezableProxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.track(c)
			if p.frozen.Load() {
				continue // held open, never answered
			}
			target := p.target.Load()
			if target == nil {
				_ = c.Close()
				continue
			}
			up, err := net.Dial("tcp", *target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.track(up)
			p.wg.Add(2)
			go func() { defer p.wg.Done(); _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { defer p.wg.Done(); _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		p.closeAll()
		p.wg.Wait()
	})
	return p
}

func (p *freezableProxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
}

func (p *freezableProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// freeze cuts the relayed connections; new ones get no answer.
func (p *freezableProxy) freeze() {
	p.frozen.Store(true)
	p.closeAll()
}

var clusterRow = regexp.MustCompile(`(?s)<tr data-broker="(\d+)" data-health="([a-z-]+)">(.*?)</tr>`)

// clusterRows GETs base's cluster page and returns each broker row's
// health state and text, by broker id.
func clusterRows(t *testing.T, base string) map[string][2]string {
	t.Helper()
	code, body := httpGet(t, base+"/ui/")
	if code != http.StatusOK {
		t.Fatalf("GET %s/ui/: %d %s", base, code, body)
	}
	out := map[string][2]string{}
	for _, m := range clusterRow.FindAllStringSubmatch(string(body), -1) {
		out[m[1]] = [2]string{m[2], m[3]}
	}
	return out
}

func TestConsoleClusterHealthOfEveryBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-broker cluster")
	}
	// Broker 1 reaches broker 3's inter-broker listener through a proxy it
	// can freeze; broker 2's disk is over the first watermark, so its row
	// can only be its own.
	proxy := startFreezableProxy(t)
	const total = int64(1_000_000_000)
	c := startTestClusterWith(t, 3, func(cfg *Config) {
		switch cfg.NodeID {
		case 1:
			cfg.PeerInterBroker = map[int32]string{3: proxy.ln.Addr().String()}
		case 2:
			cfg.DiskWatermarks = node.Watermarks{80, 90, 95}
			cfg.DiskUsage = func(string) (int64, int64, error) { return total, total * 15 / 100, nil }
		case 3:
			cfg.InterBrokerListen = freeAddr(t)
			addr := cfg.InterBrokerListen
			proxy.target.Store(&addr)
		}
	})
	b1, b2 := httpBase(c.brokers[0]), httpBase(c.brokers[1])

	// The JSON answer is the named broker's own, from any broker.
	for _, id := range []int32{1, 2, 3} {
		var h struct {
			Node int32 `json:"node"`
			Etcd struct {
				OK bool `json:"ok"`
			} `json:"etcd"`
			Disk struct {
				Level int `json:"level"`
			} `json:"disk"`
		}
		want := 0
		if id == 2 {
			want = 1
		}
		eventuallyTrue(t, fmt.Sprintf("broker 1 tells broker %d's health", id), func() (bool, string) {
			code := getJSON(t, fmt.Sprintf("%s/v1/brokers/%d/health", b1, id), &h)
			return code == http.StatusOK && h.Node == id && h.Etcd.OK && h.Disk.Level == want, fmt.Sprintf("%d %+v", code, h)
		})
	}
	if code, body := httpGet(t, b1+"/v1/brokers/x/health"); code != http.StatusBadRequest {
		t.Fatalf("health of broker x: %d %s, want 400", code, body)
	}

	// Every row of the page carries its broker's health.
	rowsOK := func(base string, ids ...string) (bool, string) {
		rows := clusterRows(t, base)
		for _, id := range ids {
			state, text := rows[id][0], rows[id][1]
			wantState, wantText := "ok", "level 0: none"
			if id == "2" {
				wantState, wantText = "warn", "level 1: no new topics or partitions"
			}
			if state != wantState || !strings.Contains(text, "healthy (read in") || !strings.Contains(text, wantText) {
				return false, fmt.Sprintf("broker %s: %s %q, want %s with etcd healthy and %q", id, state, text, wantState, wantText)
			}
		}
		return true, ""
	}
	for _, base := range []string{b1, b2} {
		eventuallyTrue(t, "every broker's health on "+base, func() (bool, string) { return rowsOK(base, "1", "2", "3") })
	}

	// Broker 3 stops answering broker 1 while it is still registered: the
	// page is served, within the timeout, with broker 3 unreachable.
	proxy.freeze()
	start := time.Now()
	rows := clusterRows(t, b1)
	t.Logf("the cluster page with broker 3 not answering took %s", time.Since(start))
	if rows["3"][0] != "unreachable" || !strings.Contains(rows["3"][1], "unreachable:") {
		t.Fatalf("broker 3 with its link frozen: %s %q, want unreachable", rows["3"][0], rows["3"][1])
	}
	if ok, why := rowsOK(b1, "1", "2"); !ok {
		t.Fatal(why)
	}
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if code := getJSON(t, b1+"/v1/brokers/3/health", &e); code != http.StatusServiceUnavailable || e.Error.Code != "peer_unreachable" {
		t.Fatalf("health of frozen broker 3: %d %+v, want 503 peer_unreachable", code, e)
	}

	// Broker 3 stopped: unreachable while its registration lasts, then
	// gone from the listing (it is a replica of nothing); never a hung
	// page, never healthy.
	c.stops[2]()
	rows = clusterRows(t, b2)
	if r, listed := rows["3"]; listed && r[0] != "unreachable" && r[0] != "not-asked" {
		t.Fatalf("stopped broker 3: %s %q, want unreachable, not asked or not listed", r[0], r[1])
	}
	if ok, why := rowsOK(b2, "1", "2"); !ok {
		t.Fatal(why)
	}
}
