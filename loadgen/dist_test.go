package loadgen

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestParseSizes(t *testing.T) {
	tests := []struct {
		spec     string
		min, max int
		wantErr  bool
	}{
		{"fixed:100", 100, 100, false},
		{"512", 512, 512, false},
		{"fixed:1KiB", 1024, 1024, false},
		{"fixed:2k", 2048, 2048, false},
		{"fixed:1MiB", 1 << 20, 1 << 20, false},
		{"uniform:100-1000", 100, 1000, false},
		{"mix:100*70,1k*25,10k*5", 100, 10240, false},
		{"mix:64KiB,256KiB", 65536, 262144, false},
		{"uniform:1000-100", 0, 0, true},
		{"uniform:100", 0, 0, true},
		{"fixed:-1", 0, 0, true},
		{"fixed:abc", 0, 0, true},
		{"mix:100*0", 0, 0, true},
		{"mix:100*x", 0, 0, true},
		{"gauss:100", 0, 0, true},
		{"fixed:100MiB", 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			d, err := ParseSizes(tt.spec)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if d.min != tt.min || d.Max() != tt.max {
				t.Fatalf("range [%d, %d], want [%d, %d]", d.min, d.Max(), tt.min, tt.max)
			}
			r := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < 10000; i++ {
				if n := d.Next(r); n < tt.min || n > tt.max {
					t.Fatalf("draw %d outside [%d, %d]", n, tt.min, tt.max)
				}
			}
		})
	}
}

func TestSizeMixProportions(t *testing.T) {
	d, err := ParseSizes("mix:100*70,1000*25,10000*5")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	counts := map[int]int{}
	const n = 100000
	for i := 0; i < n; i++ {
		counts[d.Next(r)]++
	}
	for size, want := range map[int]float64{100: 0.70, 1000: 0.25, 10000: 0.05} {
		if got := float64(counts[size]) / n; math.Abs(got-want) > 0.01 {
			t.Errorf("size %d drawn %.3f of the time, want %.2f", size, got, want)
		}
	}
	if len(counts) != 3 {
		t.Errorf("drew sizes %v", counts)
	}
}

func TestSizeUniformCoverage(t *testing.T) {
	d, err := ParseSizes("uniform:10-19")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	counts := map[int]int{}
	for i := 0; i < 10000; i++ {
		counts[d.Next(r)]++
	}
	for s := 10; s <= 19; s++ {
		if c := counts[s]; c < 800 || c > 1200 {
			t.Errorf("size %d drawn %d times of 10000, want ~1000", s, c)
		}
	}
}

func TestParseKeys(t *testing.T) {
	tests := []struct {
		spec    string
		n       int
		wantErr bool
	}{
		{"none", 0, false},
		{"uniform:100", 100, false},
		{"zipf:1000", 1000, false},
		{"zipf:1000:1.5", 1000, false},
		{"none:3", 0, true},
		{"uniform", 0, true},
		{"uniform:0", 0, true},
		{"uniform:10:2", 0, true},
		{"zipf:10:1", 0, true},
		{"zipf:10:x", 0, true},
		{"hash:10", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			d, err := ParseKeys(tt.spec)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && d.N() != tt.n {
				t.Fatalf("N = %d, want %d", d.N(), tt.n)
			}
		})
	}
}

func keyCounts(t *testing.T, spec string, draws int) (map[string]int, *KeyDist) {
	t.Helper()
	d, err := ParseKeys(spec)
	if err != nil {
		t.Fatal(err)
	}
	p := d.Picker(rand.New(rand.NewPCG(7, 8)))
	counts := map[string]int{}
	for i := 0; i < draws; i++ {
		counts[string(p.Next())]++
	}
	return counts, d
}

func TestKeysNone(t *testing.T) {
	counts, _ := keyCounts(t, "none", 100)
	if counts[""] != 100 || len(counts) != 1 {
		t.Fatalf("none drew %v", counts)
	}
}

func TestKeysUniformCoverage(t *testing.T) {
	const n, draws = 100, 100000
	counts, d := keyCounts(t, "uniform:100", draws)
	if len(counts) != n {
		t.Fatalf("saw %d distinct keys of %d", len(counts), n)
	}
	// Chi-square with 99 degrees of freedom: 99.9th percentile ~ 149.
	var chi2 float64
	exp := float64(draws) / n
	for i := 0; i < d.N(); i++ {
		c := float64(counts[string(d.keys[i])])
		chi2 += (c - exp) * (c - exp) / exp
	}
	if chi2 > 149 {
		t.Fatalf("chi-square %.1f: not uniform", chi2)
	}
}

func TestKeysZipfSkew(t *testing.T) {
	tests := []struct {
		spec        string
		minTopShare float64 // share of draws taken by the 1% hottest keys
	}{
		{"zipf:1000:1.2", 0.55},
		{"zipf:1000:1.5", 0.74},
		{"zipf:1000:2", 0.92},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			const draws = 100000
			counts, d := keyCounts(t, tt.spec, draws)
			top := 0
			for i := 0; i < d.N()/100; i++ {
				top += counts[string(d.keys[i])]
			}
			if share := float64(top) / draws; share < tt.minTopShare {
				t.Fatalf("top 1%% of keys took %.2f of draws, want >= %.2f", share, tt.minTopShare)
			}
			// Monotone at the head: key 0 is hotter than key 1, which is hotter than key 10.
			c0, c1, c10 := counts[string(d.keys[0])], counts[string(d.keys[1])], counts[string(d.keys[10])]
			if c0 <= c1 || c1 <= c10 {
				t.Fatalf("not skewed toward key 0: %d, %d, %d", c0, c1, c10)
			}
		})
	}
}
