package broker

// The operator console (broker/console) in a real headless Chromium,
// driven with chromedp, against a real broker with security on, tiered
// data in a real S3 server (versitygw), a consumer group with lag, a
// tenant, a dead-letter topic and a large payload. Every page must load
// with no console error (script, network or exception); the DOM must show
// what the JSON API answers; each page's screenshot is saved in the test's
// artifact directory (go test -artifacts keeps them).
//
// Chromium is Debian's `chromium` (.ci/run installs it). When it cannot
// start the test fails; SLUICE_SKIP_BROWSER=1 skips it instead.

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/sluice-mq/sluice/tier/objstore/s3test"
)

// browser is a headless Chromium for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	if os.Getenv("SLUICE_SKIP_BROWSER") == "1" {
		t.Skip("SLUICE_SKIP_BROWSER=1")
	}
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Fatal("no Chromium on $PATH: apt-get install chromium (as .ci/run does), or set SLUICE_SKIP_BROWSER=1 to skip")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1400, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("chromium (%s) did not start: %v", path, err)
	}
	return ctx
}

// consoleTab is one browser tab signed in with an Authorization header,
// collecting the console's messages.
type consoleTab struct {
	t     *testing.T
	ctx   context.Context
	base  string
	shots string
	who   string
	mu    sync.Mutex
	msgs  []chromedp.ConsoleMessage
}

func openTab(t *testing.T, browserCtx context.Context, base, authz, who, shots string) *consoleTab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browserCtx)
	t.Cleanup(cancel)
	tab := &consoleTab{t: t, ctx: ctx, base: base, shots: shots, who: who}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			tab.mu.Lock()
			tab.msgs = append(tab.msgs, m)
			tab.mu.Unlock()
		}
	}()
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
		Headers: network.Headers{"Authorization": authz}}); err != nil {
		t.Fatal(err)
	}
	return tab
}

// visit loads path, fails on a status other than want or on any console
// error or exception, and saves a screenshot named name.
func (c *consoleTab) visit(path string, want int, name string) {
	c.t.Helper()
	c.mu.Lock()
	c.msgs = nil
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(c.base+path))
	if err != nil {
		c.t.Fatalf("%s: navigate %s: %v", c.who, path, err)
	}
	if int(resp.Status) != want {
		c.t.Fatalf("%s: %s answered %d, want %d", c.who, path, resp.Status, want)
	}
	if err := chromedp.Do(ctx, chromedp.WaitReady("footer")); err != nil {
		c.t.Fatalf("%s: %s: no footer: %v", c.who, path, err)
	}
	// The page's scripts have run once the load event fired (Navigate
	// waits for it); a round trip through the page makes sure every
	// console message sent before it has arrived.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("document.readyState === 'complete'")); err != nil {
		c.t.Fatal(err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		c.t.Fatalf("screenshot of %s: %v", path, err)
	}
	file := filepath.Join(c.shots, c.who+"-"+name+".png")
	if err := os.WriteFile(file, shot, 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("%s %s: screenshot %s", c.who, path, file)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.msgs {
		if want != http.StatusOK && m.Source == "network" && m.URL == c.base+path {
			continue // the page itself, answered with the status wanted
		}
		if m.Type == chromedp.ConsoleError || m.IsException() {
			c.t.Errorf("%s: %s: console %s: %s (%s:%d)", c.who, path, m.Type, m.Text, m.URL, m.Line)
		}
	}
}

// eval evaluates a JavaScript expression on the current page.
func evalOn[T any](c *consoleTab, expr string) T {
	c.t.Helper()
	v, err := chromedp.Run(c.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		c.t.Fatalf("%s: evaluate %s: %v", c.who, expr, err)
	}
	return v
}

func basicHeader(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// TestConsoleInBrowser: see the file's comment.
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server and a browser")
	}
	ctx := browser(t)
	srv := s3test.Start(t)
	cfg := s3BrokerConfig(t, srv)
	cfg.Listeners = "SASL_PLAINTEXT://" + cfg.KafkaListen
	cfg.KafkaListen, cfg.KafkaAdvertise = "", ""
	cfg.SecurityEnabled = true
	cfg.AllowEveryoneIfNoACLFound = true
	cfg.AdminPasswordFile = writeFile(t, "admin-password", "admin-pw\n")
	b := startBroker(t, cfg)
	base := "http://" + b.Cfg.HTTPListen
	admin := httpCaller{t: t, client: http.DefaultClient, base: base}.with(basic("admin", "admin-pw"))
	ann := tenantHTTPSetup(t, admin, map[string]string{"ann": "acme"})["ann"]
	awaitAuthenticated(t, ann)

	// Without credentials the console asks the browser for them.
	code, _, hdr := httpCaller{t: t, client: http.DefaultClient, base: base}.call("GET", "/ui/", "")
	if code != http.StatusUnauthorized || !strings.Contains(strings.Join(hdr.Values("WWW-Authenticate"), ","), "Basic") {
		t.Fatalf("GET /ui/ without credentials: %d %v, want 401 with a Basic challenge", code, hdr)
	}

	// An API key opens it as a Basic password does, scoped the same way.
	key, _ := admin.must(http.StatusCreated, "POST", "/v1/users/ann/api-keys", `{}`)["key"].(string)
	req, err := http.NewRequest("GET", base+"/ui/topics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	var resp *http.Response
	// A new key takes effect once the broker's security view has it (a
	// watch of etcd): a moment after it is created.
	brokertest.EventuallyWhy(t, 20*time.Second, "the broker knows ann's new API key", func() (bool, string) {
		if resp, err = http.DefaultClient.Do(req); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode != http.StatusUnauthorized, resp.Status
	})
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /ui/topics with ann's API key: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	// Tiered data: three partitions, uploaded and gone from the local log.
	tiered := `{"name":"orders","partitions":3,"configs":{"segment.bytes":"4096","remote.upload.bytes":"8192",` +
		`"remote.upload.max.delay.ms":"0","local.retention.ms":"0","retention.ms":"-1"}}`
	ann.must(http.StatusCreated, "POST", "/v1/topics", tiered)
	for round := 0; round < 6; round++ {
		var msgs []string
		for i := 0; i < 50; i++ {
			key := fmt.Sprintf("customer-%d", i%7)
			if i%2 == 0 {
				key = "hot-customer"
			}
			msgs = append(msgs, fmt.Sprintf(`{"message_key":%q,"headers":{"source":"test"},"payload":"{\"order\":%d,\"pad\":\"%s\"}"}`,
				key, round*50+i, strings.Repeat("x", 200)))
		}
		ann.must(http.StatusOK, "POST", "/v1/topics/orders/messages:publish", `{"messages":[`+strings.Join(msgs, ",")+`]}`)
	}
	tieredPart := -1
	eventuallyTrue(t, "orders uploaded", func() (bool, string) {
		d := ann.must(http.StatusOK, "GET", "/v1/topics/orders", "")
		for _, p := range d["partitions"].([]any) {
			pm := p.(map[string]any)
			if rb, _ := pm["remote_bytes"].(float64); rb > 0 {
				tieredPart = int(pm["partition"].(float64))
				return true, ""
			}
		}
		return false, fmt.Sprint(d["partitions"])
	})

	// A group with lag: one member, one partition committed part-way.
	// A long session (the maximum), and a heartbeat before its page: the
	// member stays through a slow -race run.
	m := ann.must(http.StatusOK, "POST", "/v1/groups/billing/members:join", `{"topics":["orders"],"session_timeout_ms":300000}`)
	ref := fmt.Sprintf(`"member_id":%q,"generation":%s`, m["member_id"], jsonNum(m["generation"]))
	ann.must(http.StatusOK, "POST", "/v1/groups/billing/offsets:commit", fmt.Sprintf(`{%s,"offsets":[{"topic":"orders","partition":0,"offset":5}]}`, ref))

	// A dead-letter topic with one dead letter.
	ann.must(http.StatusCreated, "POST", "/v1/topics", `{"name":"jobs","partitions":1,"configs":{"retry.max.attempts":"1"}}`)
	ann.must(http.StatusOK, "POST", "/v1/topics/jobs/messages:publish",
		`{"messages":[{"message_key":"job-1","message_id":"poison","payload":"{\"job\":1}"}]}`)
	wm := ann.must(http.StatusOK, "POST", "/v1/groups/workers/members:join", `{"topics":["jobs"],"session_timeout_ms":300000}`)
	wref := fmt.Sprintf(`"member_id":%q,"generation":%s`, wm["member_id"], jsonNum(wm["generation"]))
	var fetched []any
	eventuallyTrue(t, "the job fetched", func() (bool, string) {
		f := ann.must(http.StatusOK, "POST", "/v1/groups/workers/messages:fetch", `{`+wref+`,"wait_ms":200}`)
		fetched, _ = f["messages"].([]any)
		return len(fetched) == 1, fmt.Sprint(f)
	})
	job := fetched[0].(map[string]any)
	nack := ann.must(http.StatusOK, "POST", "/v1/groups/workers/messages:nack", fmt.Sprintf(
		`{%s,"nacks":[{"topic":"jobs","partition":0,"offset":%s,"error_class":"permanent","error":"cannot parse"}]}`, wref, jsonNum(job["offset"])))
	if r := nack["results"].([]any)[0].(map[string]any); r["status"] != "dead_letter" || r["to_topic"] != "jobs.dlq" {
		t.Fatalf("nack: %v, want a dead letter in jobs.dlq", nack)
	}

	// A large payload, uploaded and published by reference.
	ann.must(http.StatusCreated, "POST", "/v1/topics", `{"name":"docs","partitions":1}`)
	payload := strings.Repeat("large payload bytes ", 100)
	sum := sha256.Sum256([]byte(payload))
	up := ann.must(http.StatusCreated, "POST", "/v1/uploads", fmt.Sprintf(`{"topic":"docs","size":%d,"sha256":%q,"content_type":"text/plain"}`, len(payload), hex.EncodeToString(sum[:])))
	upID := up["id"].(string)
	if code, out, _ := ann.call("PUT", "/v1/uploads/"+upID, payload); code >= 300 {
		t.Fatalf("upload: %d %v", code, out)
	}
	done := ann.must(http.StatusOK, "POST", "/v1/uploads/"+upID+":complete", "")
	objRef := fmt.Sprintf(`{"ref":%q,"size":%d,"sha256":%q,"content_type":"text/plain"}`, done["ref"], len(payload), hex.EncodeToString(sum[:]))
	ann.must(http.StatusOK, "POST", "/v1/topics/docs/messages:publish", `{"messages":[{"message_key":"doc-1","object_ref":`+objRef+`,"preview":"a preview"}]}`)

	// A topic of the default tenant that ann must not see.
	admin.must(http.StatusCreated, "POST", "/v1/topics", `{"name":"admin-only","partitions":1}`)

	// Two rounds of the lag history, as the sampler takes them.
	b.console.SampleOnce(context.Background())
	b.console.SampleOnce(context.Background())

	shots := t.ArtifactDir()
	asAdmin := openTab(t, ctx, base, basicHeader("admin", "admin-pw"), "admin", shots)
	asAnn := openTab(t, ctx, base, basicHeader("ann", "ann-pw"), "ann", shots)

	// The cluster: one live broker, the controller, with its health in
	// its row.
	asAdmin.visit("/ui/", http.StatusOK, "cluster")
	if got := evalOn[string](asAdmin, `document.querySelector('#brokers tbody tr').innerText`); !strings.Contains(got, "live") || !strings.Contains(got, "controller") {
		t.Errorf("cluster page's broker row %q, want live and controller", got)
	}
	if got := evalOn[string](asAdmin, `document.querySelector('#brokers tbody tr').dataset.health + ' ' + document.querySelector('#brokers tbody tr').innerText`); !strings.HasPrefix(got, "ok ") || !strings.Contains(got, "healthy") || !strings.Contains(got, "level 0") || !strings.Contains(got, "p99") {
		t.Errorf("broker health %q, want ok: etcd healthy, disk level 0 and an fsync p99", got)
	}

	// Topics: the admin sees every tenant's, by internal name; ann only
	// her own, unqualified, as GET /v1/topics answers her.
	asAdmin.visit("/ui/topics", http.StatusOK, "topics")
	if got := evalOn[string](asAdmin, `document.querySelector('#topics').innerText`); !strings.Contains(got, "acme~orders") || !strings.Contains(got, "admin-only") {
		t.Errorf("admin's topics %q", got)
	}
	asAnn.visit("/ui/topics", http.StatusOK, "topics")
	shown := evalOn[[]string](asAnn, `Array.from(document.querySelectorAll('#topics tbody tr')).map(r => r.dataset.topic)`)
	if want := topicNames(t, ann); strings.Join(shown, ",") != strings.Join(want, ",") {
		t.Errorf("ann's topics page lists %v, GET /v1/topics answers %v", shown, want)
	}

	// A topic's partitions, as GET /v1/topics/orders answers them.
	asAnn.visit("/ui/topics/orders", http.StatusOK, "topic")
	rows := evalOn[int](asAnn, `document.querySelectorAll('#partitions tbody tr').length`)
	desc := ann.must(http.StatusOK, "GET", "/v1/topics/orders", "")
	parts := desc["partitions"].([]any)
	if rows != len(parts) {
		t.Errorf("topic page shows %d partitions, the API %d", rows, len(parts))
	}
	hws := evalOn[[]string](asAnn, `Array.from(document.querySelectorAll('#partitions tbody tr td.hw')).map(td => td.innerText)`)
	for i, p := range parts {
		if want := jsonNum(p.(map[string]any)["high_watermark"]); i >= len(hws) || hws[i] != want {
			t.Errorf("partition %d's high watermark on the page %v, API %s", i, hws, want)
		}
	}
	if got := evalOn[string](asAnn, `document.querySelector('#hot-keys').innerText`); !strings.Contains(got, "hot-customer") {
		t.Errorf("hot keys %q, want hot-customer", got)
	}

	// The group: its lag figure is the one GET /v1/groups/billing/lag answers.
	asAnn.visit("/ui/groups", http.StatusOK, "groups")
	ann.must(http.StatusOK, "POST", "/v1/groups/billing/members:heartbeat", `{`+ref+`}`)
	asAnn.visit("/ui/groups/billing", http.StatusOK, "group")
	lag := ann.must(http.StatusOK, "GET", "/v1/groups/billing/lag", "")
	var total int64
	var perPart []string
	for _, p := range lag["partitions"].([]any) {
		n, _ := strconv.ParseInt(jsonNum(p.(map[string]any)["lag"]), 10, 64)
		total += n
		perPart = append(perPart, fmt.Sprint(n))
	}
	if got := evalOn[string](asAnn, `document.getElementById('total-lag').innerText`); got != fmt.Sprint(total) || total == 0 {
		t.Errorf("group page's total lag %q, the API's %d", got, total)
	}
	if got := evalOn[[]string](asAnn, `Array.from(document.querySelectorAll('#lag td.lag')).map(td => td.innerText)`); strings.Join(got, ",") != strings.Join(perPart, ",") {
		t.Errorf("group page's lag per partition %v, the API's %v", got, perPart)
	}
	if n := evalOn[int](asAnn, `document.querySelectorAll('.chart .uplot').length`); n != 3 {
		t.Errorf("%d lag charts drawn, want 3", n)
	}
	if got := evalOn[string](asAnn, `document.querySelector('#members').innerText`); !strings.Contains(got, "orders: 0, 1, 2") {
		t.Errorf("members %q, want the member assigned orders 0, 1, 2", got)
	}
	if got := evalOn[[]string](asAnn, `Array.from(document.querySelectorAll('.u-legend .u-series th')).map(th => th.innerText).filter(s => s.startsWith('orders/'))`); len(got) != 9 {
		t.Errorf("chart legends %v, want orders/0..2 in each of the three", got)
	}
	asAdmin.visit("/ui/groups/acme~billing", http.StatusOK, "group")

	// Tiered storage of the uploaded partition: its objects.
	asAnn.visit(fmt.Sprintf("/ui/tier/orders/%d", tieredPart), http.StatusOK, "tier")
	if n := evalOn[int](asAnn, `document.querySelectorAll('#tier-objects tbody tr td.mono').length`); n == 0 {
		t.Errorf("tier page lists no objects for partition %d", tieredPart)
	}
	asAnn.visit("/ui/tier/orphans", http.StatusForbidden, "orphans-refused")
	asAdmin.visit("/ui/tier/orphans", http.StatusOK, "orphans")

	// Tenants: the admin sees acme; ann her own tenant only.
	asAdmin.visit("/ui/tenants", http.StatusOK, "tenants")
	if got := evalOn[string](asAdmin, `document.querySelector('#tenants').innerText`); !strings.Contains(got, "acme") {
		t.Errorf("admin's tenants %q, want acme", got)
	}
	asAnn.visit("/ui/tenants", http.StatusOK, "tenants")
	if got := evalOn[[]string](asAnn, `Array.from(document.querySelectorAll('#tenants tbody tr')).map(r => r.dataset.tenant)`); strings.Join(got, ",") != "acme" {
		t.Errorf("ann's tenants page lists %v, want only acme", got)
	}

	// Dead letters: jobs.dlq with its one record, browsable.
	asAnn.visit("/ui/dlq", http.StatusOK, "dlq")
	if got := evalOn[string](asAnn, `(document.querySelector('[data-dlq="jobs.dlq"] .depth') || {}).innerText`); got != "1" {
		t.Errorf("jobs.dlq depth on the page %q, want 1", got)
	}
	asAdmin.visit("/ui/dlq", http.StatusOK, "dlq")
	if got := evalOn[string](asAdmin, `(document.querySelector('[data-dlq="acme~jobs.dlq"] .depth') || {}).innerText`); got != "1" {
		t.Errorf("the admin's acme~jobs.dlq depth %q, want 1", got)
	}
	asAnn.visit("/ui/messages/jobs.dlq?partition=0&format=json", http.StatusOK, "dlq-messages")
	if got := evalOn[string](asAnn, `document.querySelector('#messages').innerText`); !strings.Contains(got, `"job": 1`) || !strings.Contains(got, "cannot parse") {
		t.Errorf("dead letter shown as %q, want indented JSON and its history", got)
	}

	// The message browser: by offset as hex, by time, and a large payload's link.
	asAnn.visit("/ui/messages/orders?partition=0&offset=1&format=hex&limit=3", http.StatusOK, "messages-hex")
	if got := evalOn[[]string](asAnn, `Array.from(document.querySelectorAll('#messages tbody tr')).map(r => r.dataset.offset)`); len(got) != 3 || got[0] != "1" {
		t.Errorf("offsets from 1, limit 3: %v", got)
	}
	asAnn.visit("/ui/messages/orders?partition=0&time="+strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10), http.StatusOK, "messages-time")
	if got := evalOn[string](asAnn, `(document.querySelector('#messages tbody tr') || {dataset: {}}).dataset.offset`); got != "0" {
		t.Errorf("an hour ago starts at offset %q, want 0", got)
	}
	asAnn.visit("/ui/messages/docs?partition=0", http.StatusOK, "messages-ref")
	if got := evalOn[string](asAnn, `(document.querySelector('a.download') || {}).href || ''`); !strings.HasSuffix(got, "/v1/objects/"+done["ref"].(string)) {
		t.Errorf("download link %q, want /v1/objects/%s", got, done["ref"])
	}

	// Another tenant's names are not found; a bad page is a 404 page.
	asAnn.visit("/ui/topics/admin-only", http.StatusNotFound, "not-found")
	asAnn.visit("/ui/nowhere", http.StatusNotFound, "no-page")
}
