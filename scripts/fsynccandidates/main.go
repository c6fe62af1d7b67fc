//go:build linux

// Command fsynccandidates measures, on the disk holding -d, what one group
// commit costs under each durability design considered for the broker
// (docs/durability.md): every round, P partitions each append -b bytes,
// made durable by per-partition fdatasyncs (serial, parallel, or parallel
// over preallocated files), by one journal append and fdatasync (growing or
// preallocated), or by one syncfs. It prints each design's round latency
// and throughput.
//
//	go run ./scripts/fsynccandidates -p 8 -n 500
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

type bench struct {
	dir    string
	parts  int
	rounds int
	size   int
	buf    []byte
}

func main() {
	b := &bench{}
	flag.IntVar(&b.parts, "p", 8, "partitions")
	flag.IntVar(&b.rounds, "n", 500, "rounds per design")
	flag.IntVar(&b.size, "b", 4096, "bytes each partition appends per round")
	flag.StringVar(&b.dir, "d", "fsync-candidates.tmp", "scratch directory on the disk to measure (removed afterwards)")
	flag.Parse()
	must(os.MkdirAll(b.dir, 0o755))
	defer func() { must(os.RemoveAll(b.dir)) }()
	b.buf = make([]byte, b.size)
	for i := range b.buf {
		b.buf[i] = byte(i)
	}
	fmt.Printf("%d partitions x %d bytes per round, %d rounds each, in %s\n", b.parts, b.size, b.rounds, b.dir)

	files := b.files("serial", 0)
	b.run("append+fdatasync each, serial", func(int) {
		for _, f := range files {
			mustN(f.Write(b.buf))
			must(unix.Fdatasync(int(f.Fd())))
		}
	})
	files = b.files("parallel", 0)
	b.run("append+fdatasync each, parallel", func(int) {
		b.parallel(files, func(f *os.File) {
			mustN(f.Write(b.buf))
			must(unix.Fdatasync(int(f.Fd())))
		})
	})
	files = b.files("prealloc", int64(b.rounds*b.size))
	b.run("preallocated+fdatasync each, parallel", func(r int) {
		b.parallel(files, func(f *os.File) {
			mustN(f.WriteAt(b.buf, int64(r*b.size)))
			must(unix.Fdatasync(int(f.Fd())))
		})
	})
	round := make([]byte, 0, b.parts*b.size)
	for range b.parts {
		round = append(round, b.buf...)
	}
	j := b.files("journal", 0)[0]
	b.run("journal append+1 fdatasync", func(int) {
		mustN(j.Write(round))
		must(unix.Fdatasync(int(j.Fd())))
	})
	j = b.files("journal-prealloc", int64(b.rounds*len(round)))[0]
	b.run("journal preallocated+1 fdatasync", func(r int) {
		mustN(j.WriteAt(round, int64(r*len(round))))
		must(unix.Fdatasync(int(j.Fd())))
	})
	files = b.files("syncfs", 0)
	b.run("append each + 1 syncfs", func(int) {
		for _, f := range files {
			mustN(f.Write(b.buf))
		}
		must(unix.Syncfs(int(files[0].Fd())))
	})
}

// files creates parts files (one for the journal designs, which take the
// first) named after design, zero-filled to prealloc bytes and synced.
func (b *bench) files(design string, prealloc int64) []*os.File {
	out := make([]*os.File, b.parts)
	zero := make([]byte, 1<<20)
	for i := range out {
		f, err := os.OpenFile(filepath.Join(b.dir, fmt.Sprintf("%s-%d", design, i)), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		must(err)
		for off := int64(0); off < prealloc; off += int64(len(zero)) {
			mustN(f.WriteAt(zero[:min(int64(len(zero)), prealloc-off)], off))
		}
		must(f.Sync())
		out[i] = f
	}
	return out
}

func (b *bench) parallel(files []*os.File, fn func(*os.File)) {
	var wg sync.WaitGroup
	for _, f := range files {
		wg.Go(func() { fn(f) })
	}
	wg.Wait()
}

// run times rounds of one design and prints the round latency percentiles.
func (b *bench) run(name string, round func(r int)) {
	lat := make([]time.Duration, 0, b.rounds)
	start := time.Now()
	for r := range b.rounds {
		t := time.Now()
		round(r)
		lat = append(lat, time.Since(t))
	}
	elapsed := time.Since(start)
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(float64(len(lat)-1)*p)].Microseconds()) / 1000 }
	fmt.Printf("%-40s round p50 %7.3f ms  p99 %7.3f ms  %7.0f rounds/s  %7.1f MB/s\n", name, pct(.5), pct(.99),
		float64(b.rounds)/elapsed.Seconds(), float64(b.rounds*b.parts*b.size)/elapsed.Seconds()/1e6)
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func mustN(_ int, err error) { must(err) }
