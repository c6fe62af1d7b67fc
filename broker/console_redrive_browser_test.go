package broker

// The console's redrive form (issue 23) in a real headless Chromium against
// a real broker with security on: the admin submits the form of a tenant's
// dead-letter topic, the browser follows to the job's page, whose script
// refreshes the progress until the job is done, and the target topic holds
// the dead letters in scope; a second, slow job is cancelled with the
// page's button. A tenant's user sees the jobs read-only, with no form, and
// a POST without the page's token, or from another origin, is refused.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// consoleForm posts a form to the console and answers the status and body.
func consoleForm(t *testing.T, base, path, authz string, form url.Values, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", base+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// run runs chromedp actions on the tab, failing the test on an error.
func (c *consoleTab) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		c.t.Fatalf("%s: %s: %v", c.who, what, err)
	}
}

// TestConsoleRedriveInBrowser: see the file's comment.
func TestConsoleRedriveInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	ctx := browser(t)
	cfg := testBrokerConfig(t)
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

	// Twelve dead letters j0..j11 in jobs.dlq: each nacked as permanent.
	const n = 12
	ann.must(http.StatusCreated, "POST", "/v1/topics", `{"name":"jobs","partitions":1,"configs":{"retry.max.attempts":"1"}}`)
	var msgs []string
	for i := range n {
		msgs = append(msgs, fmt.Sprintf(`{"message_key":"k%d","message_id":"j%d","payload":"{\"job\":%d}"}`, i%3, i, i))
	}
	ann.must(http.StatusOK, "POST", "/v1/topics/jobs/messages:publish", `{"messages":[`+strings.Join(msgs, ",")+`]}`)
	wm := ann.must(http.StatusOK, "POST", "/v1/groups/workers/members:join", `{"topics":["jobs"],"session_timeout_ms":300000}`)
	wref := fmt.Sprintf(`"member_id":%q,"generation":%s`, wm["member_id"], jsonNum(wm["generation"]))
	nacked := 0
	eventuallyTrue(t, "every job fetched and nacked", func() (bool, string) {
		f := ann.must(http.StatusOK, "POST", "/v1/groups/workers/messages:fetch", `{`+wref+`,"wait_ms":200}`)
		fetched, _ := f["messages"].([]any)
		var nacks []string
		for _, m := range fetched {
			nacks = append(nacks, fmt.Sprintf(`{"topic":"jobs","partition":0,"offset":%s,"error_class":"permanent","error":"cannot parse"}`,
				jsonNum(m.(map[string]any)["offset"])))
		}
		if len(nacks) > 0 {
			ann.must(http.StatusOK, "POST", "/v1/groups/workers/messages:nack", `{`+wref+`,"nacks":[`+strings.Join(nacks, ",")+`]}`)
			nacked += len(nacks)
		}
		return nacked >= n, fmt.Sprintf("%d nacked", nacked)
	})
	eventuallyTrue(t, "jobs.dlq holds the dead letters", func() (bool, string) {
		d := ann.must(http.StatusOK, "GET", "/v1/topics/jobs.dlq", "")
		p := d["partitions"].([]any)[0].(map[string]any)
		return jsonNum(p["high_watermark"]) == fmt.Sprint(n), fmt.Sprint(p)
	})

	shots := t.ArtifactDir()
	asAdmin := openTab(t, ctx, base, basicHeader("admin", "admin-pw"), "admin", shots)
	asAnn := openTab(t, ctx, base, basicHeader("ann", "ann-pw"), "ann", shots)

	// The admin redrives offsets [0, 3) of acme~jobs.dlq to acme~jobs, unpaced.
	asAdmin.visit("/ui/dlq", http.StatusOK, "dlq-form")
	form := `form.redrive[data-dlq="acme~jobs.dlq"]`
	if got := evalOn[string](asAdmin, `document.querySelector('`+form+` input[name=target]').value`); got != "acme~jobs" {
		t.Fatalf("the form's target is %q, want the source topic acme~jobs", got)
	}
	asAdmin.run("fill and submit the form",
		chromedp.SetValue(chromedp.CSS(form+` input[name=to_offset]`), "3"),
		chromedp.SetValue(chromedp.CSS(form+` input[name=rate]`), "0"),
		chromedp.Click(chromedp.CSS(form+` button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#redrive`)))
	loc := evalOn[string](asAdmin, `location.pathname`)
	if !strings.HasPrefix(loc, "/ui/redrives/") {
		t.Fatalf("after the form the browser is at %s, want the job's page", loc)
	}
	jobID := strings.TrimPrefix(loc, "/ui/redrives/")
	// The page's script refreshes the progress in place: no reload here.
	asAdmin.run("the job done on its page", chromedp.WaitVisible(chromedp.CSS(`#redrive[data-state="done"]`)))
	if got := evalOn[string](asAdmin, `document.getElementById('redrive-progress').innerText`); !strings.HasPrefix(got, "3 of 3 decided: 3 redriven") {
		t.Errorf("the done job's progress %q, want 3 of 3 redriven", got)
	}
	if n := evalOn[int](asAdmin, `document.querySelectorAll('#redrive-cancel').length`); n != 0 {
		t.Errorf("a done job offers cancel")
	}
	asAdmin.visit(loc, http.StatusOK, "redrive-done")

	// The target holds j0..j2 again, after the n originals.
	got := ann.must(http.StatusOK, "GET", fmt.Sprintf("/v1/topics/jobs/messages?partition=0&offset=%d&limit=50", n), "")
	var ids []string
	for _, m := range got["messages"].([]any) {
		ids = append(ids, fmt.Sprint(m.(map[string]any)["message_id"]))
	}
	if strings.Join(ids, ",") != "j0,j1,j2" {
		t.Fatalf("jobs after offset %d holds %v, want the redriven j0,j1,j2", n, ids)
	}
	job := ann.must(http.StatusOK, "GET", "/v1/redrives/"+jobID, "")
	if job["state"] != "done" || jsonNum(job["redriven"]) != "3" {
		t.Fatalf("GET /v1/redrives/%s: %v", jobID, job)
	}

	// A slow job (1 record/s) of the whole DLQ, cancelled with the page's button.
	asAdmin.visit("/ui/dlq", http.StatusOK, "dlq-jobs")
	csrf := evalOn[string](asAdmin, `(document.querySelector('input[name=csrf]') || {value: ''}).value`)
	if csrf == "" {
		t.Fatal("no csrf field on the admin's page")
	}
	if got := evalOn[string](asAdmin, `document.querySelector('.redrive-box[data-dlq="acme~jobs.dlq"] tr[data-job="`+jobID+`"] .state').innerText`); got != "done" {
		t.Errorf("the DLQ page lists the first job as %q, want done", got)
	}
	asAdmin.run("start a slow redrive",
		chromedp.SetValue(chromedp.CSS(form+` input[name=rate]`), "1"),
		chromedp.Click(chromedp.CSS(form+` button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#redrive[data-state="running"]`)))
	slow := strings.TrimPrefix(evalOn[string](asAdmin, `location.pathname`), "/ui/redrives/")
	if slow == jobID || slow == "" {
		t.Fatalf("the second job's page is %q", slow)
	}
	asAdmin.run("cancel it",
		chromedp.Click(chromedp.CSS(`#redrive-cancel button`)),
		chromedp.WaitVisible(chromedp.CSS(`#redrive[data-state="cancelled"]`)))
	sj := ann.must(http.StatusOK, "GET", "/v1/redrives/"+slow, "")
	if sj["state"] != "cancelled" || jsonNum(sj["redriven"]) == fmt.Sprint(n) {
		t.Fatalf("the cancelled job: %v", sj)
	}
	asAdmin.visit("/ui/redrives/"+slow, http.StatusOK, "redrive-cancelled")

	// Ann, a tenant's user, sees the jobs, read-only: no form, no cancel.
	asAnn.visit("/ui/dlq", http.StatusOK, "dlq-read-only")
	if n := evalOn[int](asAnn, `document.querySelectorAll('form.redrive').length`); n != 0 {
		t.Errorf("ann's DLQ page has %d redrive forms, want none", n)
	}
	if got := evalOn[string](asAnn, `document.getElementById('who').innerText`); !strings.Contains(got, "read-only") {
		t.Errorf("ann's frame %q, want read-only", got)
	}
	if n := evalOn[int](asAnn, `document.querySelectorAll('tr[data-job]').length`); n != 2 {
		t.Errorf("ann's DLQ page lists %d jobs, want 2", n)
	}

	// Writes refused: a read-only user, another origin, no token, no credentials.
	for _, tc := range []struct {
		name, authz string
		form        url.Values
		hdr         map[string]string
		want        int
	}{
		{"ann", basicHeader("ann", "ann-pw"), url.Values{"target": {"jobs"}}, nil, http.StatusForbidden},
		{"another origin", basicHeader("admin", "admin-pw"), url.Values{"csrf": {csrf}, "target": {"acme~jobs"}}, map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"no token", basicHeader("admin", "admin-pw"), url.Values{"target": {"acme~jobs"}}, nil, http.StatusForbidden},
		{"no credentials", "", url.Values{"csrf": {csrf}, "target": {"acme~jobs"}}, nil, http.StatusUnauthorized},
	} {
		if code, body := consoleForm(t, base, "/ui/dlq/acme~jobs.dlq/redrives", tc.authz, tc.form, tc.hdr); code != tc.want {
			t.Errorf("%s: POST answered %d, want %d: %s", tc.name, code, tc.want, body)
		}
	}
	// The token is what the page rendered: with it, a non-browser client's POST goes through.
	if code, body := consoleForm(t, base, "/ui/redrives/"+slow+"/cancel", basicHeader("admin", "admin-pw"), url.Values{"csrf": {csrf}}, nil); code != http.StatusSeeOther {
		t.Errorf("cancel with the page's token: %d %s", code, body)
	}
	jobs := ann.must(http.StatusOK, "GET", "/v1/dlq/jobs.dlq/redrives", "")["redrives"].([]any)
	if len(jobs) != 2 {
		t.Errorf("%d redrives of jobs.dlq after the refusals, want 2: %v", len(jobs), jobs)
	}
}
