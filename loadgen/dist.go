package loadgen

// This file owns the message size and key distributions. Both are
// immutable after parsing; each producer draws from them with its own
// *rand.Rand, so they need no lock.

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
)

// SizeDist draws payload sizes in bytes.
type SizeDist struct {
	spec   string
	min    int
	max    int
	sizes  []int     // mix: the sizes
	cumW   []float64 // mix: cumulative weights, last = 1
	kind   string    // fixed | uniform | mix
	fixedN int
}

// ParseSizes reads fixed:N, uniform:A-B or mix:S*W,S*W,... Sizes accept
// the suffixes k/KiB (1024) and m/MiB (1 MiB); a bare N means fixed:N.
func ParseSizes(spec string) (*SizeDist, error) {
	kind, arg, ok := strings.Cut(spec, ":")
	if !ok {
		kind, arg = "fixed", spec
	}
	d := &SizeDist{spec: spec, kind: kind}
	switch kind {
	case "fixed":
		n, err := parseBytes(arg)
		if err != nil {
			return nil, fmt.Errorf("loadgen: sizes %q: %w", spec, err)
		}
		d.fixedN, d.min, d.max = n, n, n
	case "uniform":
		lo, hi, ok := strings.Cut(arg, "-")
		if !ok {
			return nil, fmt.Errorf("loadgen: sizes %q: uniform needs A-B", spec)
		}
		a, err := parseBytes(lo)
		if err != nil {
			return nil, fmt.Errorf("loadgen: sizes %q: %w", spec, err)
		}
		b, err := parseBytes(hi)
		if err != nil {
			return nil, fmt.Errorf("loadgen: sizes %q: %w", spec, err)
		}
		if b < a {
			return nil, fmt.Errorf("loadgen: sizes %q: %d > %d", spec, a, b)
		}
		d.min, d.max = a, b
	case "mix":
		var total float64
		for _, part := range strings.Split(arg, ",") {
			s, w, ok := strings.Cut(part, "*")
			if !ok {
				w = "1"
			}
			n, err := parseBytes(s)
			if err != nil {
				return nil, fmt.Errorf("loadgen: sizes %q: %w", spec, err)
			}
			wf, err := strconv.ParseFloat(w, 64)
			if err != nil || wf <= 0 {
				return nil, fmt.Errorf("loadgen: sizes %q: weight %q is not a positive number", spec, w)
			}
			total += wf
			d.sizes = append(d.sizes, n)
			d.cumW = append(d.cumW, total)
		}
		for i := range d.cumW {
			d.cumW[i] /= total
		}
		d.min, d.max = d.sizes[0], d.sizes[0]
		for _, n := range d.sizes {
			d.min, d.max = min(d.min, n), max(d.max, n)
		}
	default:
		return nil, fmt.Errorf("loadgen: sizes %q: kind %q is not fixed, uniform or mix", spec, kind)
	}
	return d, nil
}

// Next draws one size.
func (d *SizeDist) Next(r *rand.Rand) int {
	switch d.kind {
	case "fixed":
		return d.fixedN
	case "uniform":
		return d.min + r.IntN(d.max-d.min+1)
	default:
		u := r.Float64()
		i := sort.SearchFloat64s(d.cumW, u)
		if i >= len(d.sizes) {
			i = len(d.sizes) - 1
		}
		return d.sizes[i]
	}
}

// Max is the largest size the distribution can draw.
func (d *SizeDist) Max() int { return d.max }

// String is the spec it was parsed from.
func (d *SizeDist) String() string { return d.spec }

func parseBytes(s string) (int, error) {
	s = strings.TrimSpace(s)
	mult := 1
	lower := strings.ToLower(s)
	for _, suf := range []struct {
		s string
		m int
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"k", 1 << 10}, {"m", 1 << 20}, {"b", 1}} {
		if strings.HasSuffix(lower, suf.s) {
			mult, s = suf.m, s[:len(s)-len(suf.s)]
			break
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q is not a non-negative integer with an optional k/KiB/m/MiB suffix", s)
	}
	if n*mult > 64<<20 {
		return 0, fmt.Errorf("size %d exceeds 64 MiB", n*mult)
	}
	return n * mult, nil
}

// KeyDist draws record keys: none (nil keys), uniform over N keys, or
// Zipf-skewed over N keys (key 0 the hottest).
type KeyDist struct {
	spec string
	keys [][]byte // nil for none
	zipS float64  // > 1 for zipf; 0 for uniform
}

// ParseKeys reads none, uniform:N or zipf:N[:S] (S > 1, default 1.2).
func ParseKeys(spec string) (*KeyDist, error) {
	parts := strings.Split(spec, ":")
	d := &KeyDist{spec: spec}
	switch parts[0] {
	case "none":
		if len(parts) != 1 {
			return nil, fmt.Errorf("loadgen: keys %q: none takes no argument", spec)
		}
		return d, nil
	case "uniform", "zipf":
	default:
		return nil, fmt.Errorf("loadgen: keys %q: kind %q is not none, uniform or zipf", spec, parts[0])
	}
	if len(parts) < 2 || len(parts) > 3 || (parts[0] == "uniform" && len(parts) != 2) {
		return nil, fmt.Errorf("loadgen: keys %q: want uniform:N or zipf:N[:S]", spec)
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil || n < 1 || n > 10_000_000 {
		return nil, fmt.Errorf("loadgen: keys %q: N %q is not in 1..10000000", spec, parts[1])
	}
	if parts[0] == "zipf" {
		d.zipS = 1.2
		if len(parts) == 3 {
			s, err := strconv.ParseFloat(parts[2], 64)
			if err != nil || s <= 1 {
				return nil, fmt.Errorf("loadgen: keys %q: Zipf exponent %q must be > 1", spec, parts[2])
			}
			d.zipS = s
		}
	}
	d.keys = make([][]byte, n)
	for i := range d.keys {
		d.keys[i] = []byte(fmt.Sprintf("key-%08d", i))
	}
	return d, nil
}

// KeyPicker is one producer's view of a KeyDist; not safe for concurrent use.
type KeyPicker struct {
	d    *KeyDist
	r    *rand.Rand
	zipf *rand.Zipf
}

// Picker returns a picker drawing with r.
func (d *KeyDist) Picker(r *rand.Rand) *KeyPicker {
	p := &KeyPicker{d: d, r: r}
	if d.zipS > 0 {
		p.zipf = rand.NewZipf(r, d.zipS, 1, uint64(len(d.keys)-1))
	}
	return p
}

// Index draws a key index, or -1 for no key.
func (p *KeyPicker) Index() int {
	switch {
	case p.d.keys == nil:
		return -1
	case p.zipf != nil:
		return int(p.zipf.Uint64())
	default:
		return p.r.IntN(len(p.d.keys))
	}
}

// Next draws a key (nil for none).
func (p *KeyPicker) Next() []byte {
	i := p.Index()
	if i < 0 {
		return nil
	}
	return p.d.keys[i]
}

// N is the number of distinct keys (0 for none).
func (d *KeyDist) N() int { return len(d.keys) }

// String is the spec it was parsed from.
func (d *KeyDist) String() string { return d.spec }
