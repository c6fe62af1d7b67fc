package auth

// This file owns the delay before a failed authentication is answered
// (after Kafka's KIP-306), counted per client IP.
//
// Kafka answers every failed authentication after a fixed delay
// (connection.failed.authentication.delay.ms) so that a client guessing
// passwords cannot reconnect and retry at full speed. Sluice makes the
// delay grow with the failures of the same IP: the first failure waits
// Base, each further one twice as long, up to Max. An IP whose last
// failure is Quiet ago is forgotten, so a user who mistyped a password
// once is not slowed later, and a success forgets it at once.
//
// The table is bounded (MaxEntries). When it is full, forgotten entries are
// swept; if none is, an arbitrary entry is dropped. An attacker with more
// addresses than MaxEntries can therefore shorten some delays, but each of
// its addresses still waits at least Base per failure, and memory stays
// bounded.
//
// Invariant: len(entries) <= MaxEntries.
// Invariant: Delay(ip) is 0 or in [Base, Max].
//
// FailureDelay is safe for concurrent use: mu guards entries.

import (
	"sync"
	"time"
)

// FailureDelayConfig tunes a FailureDelay; zero fields take the defaults.
type FailureDelayConfig struct {
	Base       time.Duration    // first failure's delay; default 100 ms
	Max        time.Duration    // cap; default 5 s
	Quiet      time.Duration    // an IP without failures this long is forgotten; default 1 min
	MaxEntries int              // IPs remembered at most; default 10,000
	Now        func() time.Time // clock; nil means time.Now
}

// Defaults of FailureDelayConfig.
const (
	DefaultFailureDelayBase  = 100 * time.Millisecond
	DefaultFailureDelayMax   = 5 * time.Second
	DefaultFailureDelayQuiet = time.Minute
	DefaultFailureDelayIPs   = 10000
)

// FailureDelay counts recent authentication failures per client IP.
type FailureDelay struct {
	cfg FailureDelayConfig

	mu      sync.Mutex
	entries map[string]failures // guarded by mu
}

type failures struct {
	count int       // failures since the IP was last forgotten
	last  time.Time // time of the latest
}

// NewFailureDelay returns an empty table.
func NewFailureDelay(cfg FailureDelayConfig) *FailureDelay {
	if cfg.Base <= 0 {
		cfg.Base = DefaultFailureDelayBase
	}
	if cfg.Max <= 0 {
		cfg.Max = DefaultFailureDelayMax
	}
	cfg.Max = max(cfg.Max, cfg.Base)
	if cfg.Quiet <= 0 {
		cfg.Quiet = DefaultFailureDelayQuiet
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultFailureDelayIPs
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &FailureDelay{cfg: cfg, entries: make(map[string]failures)}
}

// Fail counts a failed authentication from ip (the client's address
// without its port). The caller then waits Delay(ip) before answering.
func (d *FailureDelay) Fail(ip string) {
	now := d.cfg.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ok := d.entries[ip]
	if ok && d.forgotten(f, now) {
		f = failures{}
	}
	if !ok && len(d.entries) >= d.cfg.MaxEntries {
		d.makeRoom(now)
	}
	f.count++
	f.last = now
	d.entries[ip] = f
}

// Succeed forgets ip's failures.
func (d *FailureDelay) Succeed(ip string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.entries, ip)
}

// Delay is how long to hold the answer to ip's latest failed
// authentication: 0 without recent failures, Base after one, doubling with
// each further one, at most Max.
func (d *FailureDelay) Delay(ip string) time.Duration {
	now := d.cfg.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ok := d.entries[ip]
	if !ok || f.count == 0 {
		return 0
	}
	if d.forgotten(f, now) {
		delete(d.entries, ip)
		return 0
	}
	delay := d.cfg.Base
	for i := 1; i < f.count && delay < d.cfg.Max; i++ {
		delay *= 2
	}
	return min(delay, d.cfg.Max)
}

// Len is the number of IPs remembered, for metrics.
func (d *FailureDelay) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.entries)
}

func (d *FailureDelay) forgotten(f failures, now time.Time) bool {
	return now.Sub(f.last) >= d.cfg.Quiet
}

// makeRoom frees at least one entry. Called with mu held and the table
// full.
func (d *FailureDelay) makeRoom(now time.Time) {
	for ip, f := range d.entries {
		if d.forgotten(f, now) {
			delete(d.entries, ip)
		}
	}
	if len(d.entries) < d.cfg.MaxEntries {
		return
	}
	for ip := range d.entries { // map order: an arbitrary victim
		delete(d.entries, ip)
		return
	}
}
