package s3fault

// faults.go owns what the proxy injects: the operations faults are set for
// (Op), the kinds of fault it counts (Kind), the per-operation settings
// (OpFaults, Faults), and the seeded generator that turns them into a plan
// for one request.
//
// Invariant: every request draws exactly three values from the generator
// (decide), whatever its operation and the faults in force, so a sequence
// of requests issued one after another meets the same decisions under the
// same seed.
// Invariant: Proxy.faults is only replaced whole, by SetFaults or Heal,
// after validation; a request reads it once, in decide.
// Proxy.mu guards faults and rng.

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Op is the S3 operation a request is classified as (see classify.go).
type Op int

// The operations. OpOther (bucket and service calls, multipart control,
// subresources such as ?acl or ?tagging) is forwarded untouched: no fault
// is ever set for it.
const (
	OpGet       Op = iota // GET of an object, whole
	OpRangedGet           // GET of an object with a Range header
	OpHead                // HEAD of an object
	OpPut                 // PUT of an object (also a multipart part or a copy)
	OpDelete              // DELETE of an object, or a POST ?delete batch
	OpList                // GET of a bucket: ListObjects (v1 or v2)
	OpOther
	numOps
)

var opNames = [numOps]string{"get", "ranged-get", "head", "put", "delete", "list", "other"}

func (o Op) String() string {
	if o < 0 || o >= numOps {
		return fmt.Sprintf("op(%d)", int(o))
	}
	return opNames[o]
}

// MarshalText names the operation, so Stats maps encode with readable keys.
func (o Op) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// Kind is a kind of injected fault, as counted in Stats.Injected.
type Kind int

// The kinds of fault.
const (
	KindLatency       Kind = iota // a request held before it was forwarded
	KindInternalError             // 500 InternalError, not forwarded
	KindSlowDown                  // 503 SlowDown, not forwarded
	KindLostResponse              // forwarded and completed, then the connection closed
	KindTruncate                  // a GET's body cut off after half
	numKinds
)

var kindNames = [numKinds]string{"latency", "internal-error", "slow-down", "lost-response", "truncate"}

func (k Kind) String() string {
	if k < 0 || k >= numKinds {
		return fmt.Sprintf("kind(%d)", int(k))
	}
	return kindNames[k]
}

// MarshalText names the kind, so Stats maps encode with readable keys.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// OpFaults are the faults of one operation. Rates are probabilities in
// [0, 1] decided afresh for every request. The zero value forwards every
// request untouched.
type OpFaults struct {
	// Delay holds a request this long, Jitter more or less (uniform, never
	// below zero), before anything else happens to it.
	Delay, Jitter time.Duration
	// InternalErrorRate and SlowDownRate answer 500 InternalError and 503
	// SlowDown without forwarding. One draw decides both, so the rates are
	// exact and their sum must not exceed 1.
	InternalErrorRate, SlowDownRate float64
	// LostResponseRate forwards the request, lets the upstream finish it and
	// closes the client's connection without a response.
	LostResponseRate float64
	// TruncateRate (OpGet and OpRangedGet only) forwards the request and
	// closes the client's connection after half of a successful response's
	// body, its headers declaring the whole length. One draw decides this
	// and LostResponseRate; their sum must not exceed 1.
	TruncateRate float64
}

// Validate reports settings that cannot be applied to op.
func (f OpFaults) Validate(op Op) error {
	if f.Delay < 0 || f.Jitter < 0 {
		return fmt.Errorf("s3fault: %s: negative delay %v or jitter %v", op, f.Delay, f.Jitter)
	}
	rates := []struct {
		name string
		r    float64
	}{
		{"internal error", f.InternalErrorRate}, {"slow down", f.SlowDownRate},
		{"lost response", f.LostResponseRate}, {"truncate", f.TruncateRate},
	}
	for _, r := range rates {
		if math.IsNaN(r.r) || r.r < 0 || r.r > 1 {
			return fmt.Errorf("s3fault: %s: %s rate %v outside [0, 1]", op, r.name, r.r)
		}
	}
	if f.InternalErrorRate+f.SlowDownRate > 1 {
		return fmt.Errorf("s3fault: %s: internal error rate %v and slow down rate %v add up to more than 1",
			op, f.InternalErrorRate, f.SlowDownRate)
	}
	if f.LostResponseRate+f.TruncateRate > 1 {
		return fmt.Errorf("s3fault: %s: lost response rate %v and truncate rate %v add up to more than 1",
			op, f.LostResponseRate, f.TruncateRate)
	}
	if f.TruncateRate > 0 && op != OpGet && op != OpRangedGet {
		return fmt.Errorf("s3fault: %s: truncation applies to GETs only", op)
	}
	return nil
}

// Faults are the faults of every operation. The zero value is a healthy
// proxy.
type Faults struct {
	Get, RangedGet, Head, Put, Delete, List OpFaults
}

// AllOps returns Faults with f set for every operation; f.TruncateRate is
// kept for the two GETs only.
func AllOps(f OpFaults) Faults {
	noTrunc := f
	noTrunc.TruncateRate = 0
	return Faults{Get: f, RangedGet: f, Head: noTrunc, Put: noTrunc, Delete: noTrunc, List: noTrunc}
}

// Of returns the faults of op; OpOther has none.
func (f Faults) Of(op Op) OpFaults {
	switch op {
	case OpGet:
		return f.Get
	case OpRangedGet:
		return f.RangedGet
	case OpHead:
		return f.Head
	case OpPut:
		return f.Put
	case OpDelete:
		return f.Delete
	case OpList:
		return f.List
	default:
		return OpFaults{}
	}
}

// Validate reports every operation whose faults cannot be applied.
func (f Faults) Validate() error {
	var errs []error
	for op := range OpOther {
		if err := f.Of(op).Validate(op); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SetFaults replaces the faults of every operation; requests already past
// their decision keep the faults they drew.
func (p *Proxy) SetFaults(f Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	p.mu.Lock()
	p.faults = f
	p.mu.Unlock()
	p.log.Info().Interface("faults", f).Msg("faults set")
	return nil
}

// Heal removes every fault.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.faults = Faults{}
	p.mu.Unlock()
	p.log.Info().Msg("healed")
}

// Faults returns the faults in force.
func (p *Proxy) Faults() Faults {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults
}

// reply is what a request meets once forwarded.
type reply int

const (
	replyForward  reply = iota // pass the response through
	replyLost                  // complete upstream, then close without a response
	replyTruncate              // send half the body, then close
)

// plan is what the generator decided for one request.
type plan struct {
	wait    time.Duration
	errKind Kind // KindInternalError or KindSlowDown: answer without forwarding; else -1
	reply   reply
}

// decide draws the faults of one request of op: always three values (see
// the invariant above), whether or not they are used.
func (p *Proxy) decide(op Op) plan {
	p.mu.Lock()
	f := p.faults.Of(op)
	jitter, before, after := p.rng.Float64(), p.rng.Float64(), p.rng.Float64()
	p.mu.Unlock()

	pl := plan{wait: f.Delay, errKind: -1}
	if f.Jitter > 0 {
		// Uniform in [Delay-Jitter, Delay+Jitter], never below zero.
		pl.wait += time.Duration((2*jitter - 1) * float64(f.Jitter))
		pl.wait = max(pl.wait, 0)
	}
	switch {
	case before < f.InternalErrorRate:
		pl.errKind = KindInternalError
	case before < f.InternalErrorRate+f.SlowDownRate:
		pl.errKind = KindSlowDown
	}
	switch {
	case after < f.LostResponseRate:
		pl.reply = replyLost
	case after < f.LostResponseRate+f.TruncateRate:
		pl.reply = replyTruncate
	}
	return pl
}
