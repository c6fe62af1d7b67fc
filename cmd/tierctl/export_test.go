package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// exported is what a test reads back from an export, row by row.
type exported struct {
	offsets []int64
	ts      []arrow.Timestamp
	keys    [][]byte // nil for null
	values  [][]byte
	headers [][][2]string
}

func (x *exported) add(rec arrow.RecordBatch) {
	off := rec.Column(0).(*array.Int64)
	ts := rec.Column(1).(*array.Timestamp)
	key := rec.Column(2).(*array.Binary)
	val := rec.Column(3).(*array.Binary)
	hs := rec.Column(4).(*array.List)
	hst := hs.ListValues().(*array.Struct)
	hk, hv := hst.Field(0).(*array.String), hst.Field(1).(*array.Binary)
	for i := range int(rec.NumRows()) {
		x.offsets = append(x.offsets, off.Value(i))
		x.ts = append(x.ts, ts.Value(i))
		get := func(b *array.Binary) []byte {
			if b.IsNull(i) {
				return nil
			}
			return append([]byte{}, b.Value(i)...)
		}
		x.keys, x.values = append(x.keys, get(key)), append(x.values, get(val))
		start, end := hs.ValueOffsets(i)
		var row [][2]string
		for j := start; j < end; j++ {
			row = append(row, [2]string{hk.Value(int(j)), string(hv.Value(int(j)))})
		}
		x.headers = append(x.headers, row)
	}
}

func readArrow(t *testing.T, path string) *exported {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	r, err := ipc.NewFileReader(fh, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.Schema().Equal(exportSchema) {
		t.Fatalf("schema %v", r.Schema())
	}
	x := &exported{}
	for i := range r.NumRecords() {
		rec, err := r.RecordBatch(i)
		if err != nil {
			t.Fatal(err)
		}
		x.add(rec)
	}
	return x
}

func readParquet(t *testing.T, path string) *exported {
	t.Helper()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1000}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := fr.GetRecordReader(t.Context(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if s := rr.Schema(); s.Field(1).Type.(*arrow.TimestampType).Unit != arrow.Millisecond || s.Field(4).Type.ID() != arrow.LIST {
		t.Fatalf("schema %v", s)
	}
	x := &exported{}
	for rr.Next() {
		x.add(rr.RecordBatch())
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	return x
}

func TestExport(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	tests := []struct {
		format   string
		local    bool
		from, to int64
		read     func(*testing.T, string) *exported
	}{
		{"parquet", true, 0, 100, readParquet},
		{"arrow", true, 0, 100, readArrow},
		{"parquet", false, 2, 79, readParquet},
		{"arrow", false, 2, 79, readArrow},
	}
	for _, tc := range tests {
		name := tc.format + map[bool]string{true: "-local", false: "-remote"}[tc.local]
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(dir, name)
			args := []string{"export", "orders/0", "--format", tc.format, "--out", out}
			if tc.local {
				args = append(args, "--data-dir", f.dataDir) // whole partition by default
			} else {
				args = append(args, "--from", "2", "--to", "79")
			}
			if o := f.mustRun(t, 0, args...); !strings.Contains(o, "records of orders/0") {
				t.Fatalf("export said:\n%s", o)
			}
			x := tc.read(t, out)
			if len(x.offsets) != int(tc.to-tc.from) {
				t.Fatalf("%d rows, want %d", len(x.offsets), tc.to-tc.from)
			}
			for i, off := range x.offsets {
				want := tc.from + int64(i)
				r := rec(int(want))
				if off != want || int64(x.ts[i]) != t0+want*1000 || string(x.keys[i]) != string(r.Key) || (x.keys[i] == nil) != (r.Key == nil) ||
					string(x.values[i]) != string(r.Value) || len(x.headers[i]) != 1 || x.headers[i][0] != [2]string{"h", string(r.Headers[0].Value)} {
					t.Fatalf("row %d: offset %d ts %d key %q value %q headers %v", i, off, x.ts[i], x.keys[i], x.values[i], x.headers[i])
				}
			}
			countFiles(t, dir)
		})
	}
	// An empty range writes a file with the schema and no rows.
	out := filepath.Join(dir, "empty.arrow")
	f.mustRun(t, 0, "export", "orders/0", "--format", "arrow", "--from", "10", "--to", "10", "--out", out)
	if x := readArrow(t, out); len(x.offsets) != 0 {
		t.Fatalf("empty export has %d rows", len(x.offsets))
	}
	// A range outside the partition fails and leaves nothing behind.
	out = filepath.Join(dir, "bad.parquet")
	if code, _, errs := f.run(t, "export", "orders/0", "--from", "70", "--to", "95", "--out", out); code != 2 || !strings.Contains(errs, "offset 80 is in neither") {
		t.Fatalf("export past the remote end: %d %s", code, errs)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a failed export left %s: %v", out, err)
	}
}

// countFiles counts the files in dir, failing on a temporary one left.
func countFiles(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Fatalf("temporary file %s left", e.Name())
		}
	}
	return len(entries)
}
