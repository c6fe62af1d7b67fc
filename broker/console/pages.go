package console

// This file owns the listing pages: the cluster, topics and a topic,
// groups and a group (with its lag charts), tenants and their quotas, and
// the dead-letter topics. Each asks the JSON API as the caller (source.go)
// and renders what it answered; a part the API refused or could not answer
// is shown as a note on the page rather than failing it, except the page's
// main answer (a topic that does not exist is the page's 404).
//
// Invariant: nothing here changes state.

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/queue"
)

// clusterPage is the cluster page's content.
type clusterPage struct {
	Brokers []brokerRow
	Timeout string // how long a broker's health is waited for
	Scheme  string // of the brokers' consoles: this request's
}

// brokerRow is a broker of the listing with its health.
type brokerRow struct {
	brokerAnswer
	Health brokerHealth
}

func (q *request) cluster() {
	var b brokersAnswer
	if err := q.api.get(q.ctx(), "/v1/brokers", nil, &b); err != nil {
		q.fail("Cluster", err)
		return
	}
	scheme := "http"
	if q.r.TLS != nil {
		scheme = "https"
	}
	health := q.brokersHealth(b)
	content := clusterPage{Timeout: q.c.cfg.HealthTimeout.String(), Scheme: scheme}
	for _, br := range b.Brokers {
		content.Brokers = append(content.Brokers, brokerRow{brokerAnswer: br, Health: health[br.ID]})
	}
	q.render(http.StatusOK, "cluster", page{Title: "Cluster", Content: content})
}

func (q *request) topics() {
	var t topicsAnswer
	if err := q.api.get(q.ctx(), "/v1/topics", nil, &t); err != nil {
		q.fail("Topics", err)
		return
	}
	q.render(http.StatusOK, "topics", page{Title: "Topics", Content: t})
}

// topicPage is a topic page's content.
type topicPage struct {
	Topic   topicAnswer
	HotKeys *hotKeysAnswer
	DLQ     string // the topic's dead-letter topic, when it has a queue contract
}

func (q *request) topic(name string) {
	var t topicAnswer
	if err := q.api.get(q.ctx(), "/v1/topics/"+escape(name), nil, &t); err != nil {
		q.fail("Topic "+name, err)
		return
	}
	p := page{Title: "Topic " + name, Nav: "topics"}
	content := topicPage{Topic: t}
	var hk hotKeysAnswer
	if err := q.api.get(q.ctx(), "/v1/topics/"+escape(name)+"/hot-keys", nil, &hk); err != nil {
		p.Notes = append(p.Notes, "Hot keys: "+err.Error())
	} else {
		content.HotKeys = &hk
	}
	if c, ok := contractOf(t); ok {
		content.DLQ = deadLetterOf(c, name)
	}
	p.Content = content
	q.render(http.StatusOK, "topic", p)
}

// contractOf is the queue contract of a topic's configs, if it has one.
func contractOf(t topicAnswer) (queue.Contract, bool) {
	cfg := map[string]string{}
	set := false
	for _, c := range t.Configs {
		if queue.IsConfig(c.Name) {
			cfg[c.Name] = c.Value
			set = set || !c.IsDefault
		}
	}
	if !set {
		return queue.Contract{}, false
	}
	c, err := queue.ParseContract(cfg)
	return c, err == nil
}

// deadLetterOf is the dead-letter topic of topic, named as topic is: a
// super user's internal names keep their tenant (the contract names a
// topic of the same tenant).
func deadLetterOf(c queue.Contract, topic string) string {
	tenant, local := node.SplitName(topic)
	return node.QualifyName(tenant, c.DeadLetterTopic(local))
}

func (q *request) groups() {
	var g groupsAnswer
	if err := q.api.get(q.ctx(), "/v1/groups", nil, &g); err != nil {
		q.fail("Groups", err)
		return
	}
	p := page{Title: "Groups", Content: g}
	for _, e := range g.Errors {
		p.Notes = append(p.Notes, fmt.Sprintf("Broker %d could not be asked: %s", e.Node, e.Message))
	}
	q.render(http.StatusOK, "groups", p)
}

// groupPage is a group page's content.
type groupPage struct {
	Group    groupAnswer
	Lag      lagAnswer
	TotalLag int64
	Chart    chartData
	Interval string
	// ChartsAt is the console of the group's coordinator, which keeps its
	// history, when that is another broker.
	ChartsAt  string
	ChartsURL string // "" when it is not live
}

// brokerConsole is the URL of a page on another broker's console, "" when
// the broker is not live.
func (q *request) brokerConsole(id int32, path string) string {
	var b brokersAnswer
	if err := q.api.get(q.ctx(), "/v1/brokers", nil, &b); err != nil {
		return ""
	}
	for _, br := range b.Brokers {
		if br.ID == id && br.Live && br.HTTP != "" {
			scheme := "http://"
			if q.r.TLS != nil {
				scheme = "https://"
			}
			return scheme + br.HTTP + path
		}
	}
	return ""
}

// chartData is what console.js draws: one x axis (seconds) and a series
// per partition, null where a round has no sample of it.
type chartData struct {
	Times    []float64     `json:"t"`
	From, To float64       // the window: the x axis always spans it
	Series   []chartSeries `json:"series"`
}

type chartSeries struct {
	Label    string   `json:"label"`
	Lag      []*int64 `json:"lag"`
	LagBytes []*int64 `json:"lag_bytes"`
	AgeSec   []*int64 `json:"age_s"`
}

func (q *request) group(name string) {
	var g groupAnswer
	if err := q.api.get(q.ctx(), "/v1/groups/"+escape(name), nil, &g); err != nil {
		q.fail("Group "+name, err)
		return
	}
	p := page{Title: "Group " + name, Nav: "groups"}
	content := groupPage{Group: g, Interval: q.c.history.cfg.Interval.String()}
	if err := q.api.get(q.ctx(), "/v1/groups/"+escape(name)+"/lag", nil, &content.Lag); err != nil {
		p.Notes = append(p.Notes, "Lag: "+err.Error())
	}
	for _, l := range content.Lag.Partitions {
		content.TotalLag += l.Lag
	}
	content.Chart = q.chart(q.internal(name))
	if n := q.c.cfg.Node; n != nil && g.Coordinator != n.Cfg.NodeID {
		content.ChartsAt = fmt.Sprintf("broker %d", g.Coordinator)
		content.ChartsURL = q.brokerConsole(g.Coordinator, "/ui/groups/"+escape(name))
	}
	p.Content = content
	q.render(http.StatusOK, "group", p)
}

// chart is a group's history as chart data; the series are labelled with
// the names the caller uses.
func (q *request) chart(internalGroup string) chartData {
	now := q.c.cfg.Now()
	keys := q.c.history.GroupKeys(internalGroup)
	times := map[int64]bool{}
	all := make([][]Sample, len(keys))
	for i, k := range keys {
		all[i] = q.c.history.Series(k, now)
		for _, s := range all[i] {
			times[s.AtMs] = true
		}
	}
	ms := make([]int64, 0, len(times))
	for t := range times {
		ms = append(ms, t)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i] < ms[j] })
	out := chartData{Times: make([]float64, len(ms)), Series: []chartSeries{},
		From: float64(now.Add(-q.c.history.cfg.Window).UnixMilli()) / 1000, To: float64(now.UnixMilli()) / 1000}
	at := make(map[int64]int, len(ms))
	for i, t := range ms {
		at[t] = i
		out.Times[i] = float64(t) / 1000 // uPlot's x is in seconds
	}
	for i, k := range keys {
		topic := k.Topic
		if !q.id.IsSuper() {
			_, topic = node.SplitName(k.Topic)
		}
		s := chartSeries{Label: fmt.Sprintf("%s/%d", topic, k.Partition),
			Lag: make([]*int64, len(out.Times)), LagBytes: make([]*int64, len(out.Times)), AgeSec: make([]*int64, len(out.Times))}
		for _, smp := range all[i] {
			j := at[smp.AtMs]
			lag, b, age := smp.Lag, smp.LagBytes, smp.OldestAgeMs/1000
			s.Lag[j], s.LagBytes[j], s.AgeSec[j] = &lag, &b, &age
		}
		out.Series = append(out.Series, s)
	}
	return out
}

// tenantsPage is the tenants page's content.
type tenantsPage struct {
	Tenants []tenantRow
}

type tenantRow struct {
	Name          string
	Pool          string
	Limits        map[string]float64
	Weight        float64
	PriorityClass string
	QuotaError    string
	Use           tenantUse
}

func (q *request) tenants() {
	p := page{Title: "Tenants"}
	use := q.c.tenantUse()
	var rows []tenantRow
	if q.admin {
		var ts struct {
			Tenants []struct {
				Name string `json:"name"`
				Pool string `json:"pool"`
			} `json:"tenants"`
		}
		if err := q.api.get(q.ctx(), "/v1/tenants", nil, &ts); err != nil {
			p.Notes = append(p.Notes, "Tenants: "+err.Error())
		}
		var qs struct {
			Tenants []quotaAnswer `json:"tenants"`
		}
		if err := q.api.get(q.ctx(), "/v1/quotas", nil, &qs); err != nil {
			p.Notes = append(p.Notes, "Quotas: "+err.Error())
		}
		byName := map[string]*tenantRow{}
		add := func(name string) *tenantRow {
			if r, ok := byName[name]; ok {
				return r
			}
			r := &tenantRow{Name: name, Weight: 1, Use: use[name]}
			byName[name] = r
			return r
		}
		for _, t := range ts.Tenants {
			add(t.Name).Pool = t.Pool
		}
		for _, qa := range qs.Tenants {
			r := add(qa.Tenant)
			r.Limits, r.Weight, r.PriorityClass = qa.Limits, qa.Weight, qa.PriorityClass
		}
		for name := range use {
			add(name)
		}
		for _, r := range byName {
			rows = append(rows, *r)
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	} else {
		// Everyone else sees their own tenant; its quotas are readable by
		// its admins (secapi), and said so otherwise.
		tenant := q.id.Principal.Tenant
		r := tenantRow{Name: tenant, Weight: 1, Use: use[tenant]}
		var qa quotaAnswer
		if err := q.api.get(q.ctx(), "/v1/tenants/"+escape(tenant)+"/quotas", nil, &qa); err != nil {
			r.QuotaError = err.Error()
		} else {
			r.Limits, r.Weight, r.PriorityClass = qa.Limits, qa.Weight, qa.PriorityClass
		}
		rows = append(rows, r)
	}
	p.Content = tenantsPage{Tenants: rows}
	q.render(http.StatusOK, "tenants", p)
}

type quotaAnswer struct {
	Tenant        string             `json:"tenant"`
	Limits        map[string]float64 `json:"limits"`
	Weight        float64            `json:"weight"`
	PriorityClass string             `json:"priority_class"`
}

// dlqPage is the dead-letter page's content.
type dlqPage struct {
	Topics []dlqRow
	// CanWrite: each topic has a redrive form (redrive.go), with CSRF.
	CanWrite bool
	CSRF     string
}

type dlqRow struct {
	Topic      string
	Sources    []string // the topics whose contract names it
	Partitions []partitionAnswer
	Depth      int64
	Error      string
	Redrives   []redriveAnswer // its redrive jobs, newest first (at most maxJobsShown)
	JobsError  string
}

// maxJobsShown is how many of a DLQ's redrive jobs its row lists.
const maxJobsShown = 5

func (q *request) dlq() {
	var ts topicsAnswer
	if err := q.api.get(q.ctx(), "/v1/topics", nil, &ts); err != nil {
		q.fail("Dead letters", err)
		return
	}
	p := page{Title: "Dead letters"}
	described := map[string]topicAnswer{}
	sources := map[string][]string{}
	for _, t := range ts.Topics {
		var d topicAnswer
		if err := q.api.get(q.ctx(), "/v1/topics/"+escape(t.Name), nil, &d); err != nil {
			p.Notes = append(p.Notes, t.Name+": "+err.Error())
			continue
		}
		described[t.Name] = d
		if c, ok := contractOf(d); ok {
			dl := deadLetterOf(c, t.Name)
			sources[dl] = append(sources[dl], t.Name)
		}
	}
	var rows []dlqRow
	for name, src := range sources {
		r := dlqRow{Topic: name, Sources: src}
		d, ok := described[name]
		if !ok {
			r.Error = "not created yet (made at the first dead letter) or not visible to you"
		}
		for _, pa := range d.Partitions {
			if pa.HighWatermark != nil {
				r.Depth += *pa.HighWatermark - pa.LogStart
			}
			r.Partitions = append(r.Partitions, pa)
		}
		if ok {
			var jobs struct {
				Redrives []redriveAnswer `json:"redrives"`
			}
			if err := q.api.get(q.ctx(), "/v1/dlq/"+escape(name)+"/redrives", nil, &jobs); err != nil {
				r.JobsError = err.Error()
			}
			r.Redrives = jobs.Redrives[:min(len(jobs.Redrives), maxJobsShown)]
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Topic < rows[j].Topic })
	p.Content = dlqPage{Topics: rows, CanWrite: q.canWrite(), CSRF: q.c.csrfToken(q.r)}
	q.render(http.StatusOK, "dlq", p)
}

// ageString is a duration in ms for a person.
func ageString(ms int64) string {
	if ms <= 0 {
		return "0s"
	}
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return d.String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	default:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	}
}
