package main

// cmd_export.go owns `tierctl export`: the records of one partition in
// [from, to) written as an Arrow IPC file or a Parquet file (apache/arrow-go)
// with the columns
//
//	offset     int64
//	timestamp  timestamp[ms, UTC]
//	key        binary (null for a null key)
//	value      binary (null for a tombstone)
//	headers    list<struct<key: string, value: binary>>
//
// which pyarrow, DuckDB and Spark read as they are. The file is written
// under a temporary name next to --out and renamed when complete, so a
// failed export leaves no partial file behind.

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/sluice-mq/sluice/wal"
)

// exportRows is the number of rows per record batch (and Parquet row group
// write).
const exportRows = 8192

var exportSchema = arrow.NewSchema([]arrow.Field{
	{Name: "offset", Type: arrow.PrimitiveTypes.Int64},
	{Name: "timestamp", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
	{Name: "key", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "value", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "headers", Type: arrow.ListOf(arrow.StructOf(
		arrow.Field{Name: "key", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "value", Type: arrow.BinaryTypes.Binary, Nullable: true},
	))},
}, nil)

// recordWriter is an Arrow IPC or Parquet file writer.
type recordWriter interface {
	Write(rec arrow.RecordBatch) error
	Close() error
}

func exportFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	var from, to offsetFlag
	fs.Var(&from, "from", "first `offset` (default: the log start)")
	fs.Var(&to, "to", "`offset` after the last (default: the partition's end)")
	format := fs.String("format", "parquet", "arrow (Arrow IPC file) or parquet")
	out := fs.String("out", "", "file to write (required)")
	return func(ctx context.Context, e *env, args []string) error {
		if *out == "" {
			return usagef("export: --out is required")
		}
		if *format != "arrow" && *format != "parquet" {
			return usagef("export: --format %q: want arrow or parquet", *format)
		}
		if err := onePartitionArg(args); err != nil {
			return err
		}
		if err := e.connect(ctx, true); err != nil {
			return err
		}
		t, err := e.onePartition(ctx, args)
		if err != nil {
			return err
		}
		l, err := e.local(t)
		if err != nil {
			return err
		}
		lo, hi := wal.Offset(t.head.LogStart), wal.Offset(t.head.RemoteEnd)
		if l != nil {
			if t.head.RemoteEnd <= t.head.LogStart {
				lo = l.log.StartOffset()
			}
			hi = max(hi, l.log.EndOffset())
		}
		if from.set {
			lo = from.v
		}
		if to.set {
			hi = to.v
		}
		if hi < lo {
			return usagef("export: --to %d is below --from %d", hi, lo)
		}
		rows, err := e.export(ctx, t, l, lo, hi, *format, *out)
		if err != nil {
			return err
		}
		if e.g.json {
			return e.writeJSON(map[string]any{"partition": t.String(), "from": lo, "to": hi, "rows": rows, "format": *format, "out": *out})
		}
		fmt.Fprintf(e.stdout, "wrote %d records of %s [%d, %d) to %s (%s)\n", rows, t, lo, hi, *out, *format)
		return nil
	}
}

// export writes the records of t in [from, to) to path and returns how many.
func (e *env) export(ctx context.Context, t target, l *localLog, from, to wal.Offset, format, path string) (rows int64, err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return 0, fmt.Errorf("export: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	buf := bufio.NewWriterSize(f, 1<<20) // not an io.Closer: the writers cannot close f
	w, err := newRecordWriter(format, buf)
	if err != nil {
		return 0, err
	}
	p := e.progress("export", int64(to-from))
	rows, err = e.writeRecords(ctx, t, l, from, to, w, p)
	p.done()
	if cerr := w.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("export: finish %s: %w", format, cerr)
	}
	if err != nil {
		return 0, err
	}
	if err := buf.Flush(); err != nil {
		return 0, fmt.Errorf("export: %w", err)
	}
	if err := f.Chmod(0o644); err != nil { // CreateTemp made it 0600
		return 0, fmt.Errorf("export: %w", err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("export: %w", err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("export: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return 0, fmt.Errorf("export: %w", err)
	}
	return rows, nil
}

func newRecordWriter(format string, w io.Writer) (recordWriter, error) {
	if format == "arrow" {
		fw, err := ipc.NewFileWriter(w, ipc.WithSchema(exportSchema), ipc.WithAllocator(memory.DefaultAllocator))
		if err != nil {
			return nil, fmt.Errorf("export: arrow writer: %w", err)
		}
		return fw, nil
	}
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithAllocator(memory.DefaultAllocator))
	fw, err := pqarrow.NewFileWriter(exportSchema, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, fmt.Errorf("export: parquet writer: %w", err)
	}
	return fw, nil
}

// rowBuilder accumulates rows of exportSchema.
type rowBuilder struct {
	b       *array.RecordBuilder
	offset  *array.Int64Builder
	ts      *array.TimestampBuilder
	key     *array.BinaryBuilder
	value   *array.BinaryBuilder
	headers *array.ListBuilder
	hdr     *array.StructBuilder
	hkey    *array.StringBuilder
	hvalue  *array.BinaryBuilder
	n       int
}

func newRowBuilder() *rowBuilder {
	b := array.NewRecordBuilder(memory.DefaultAllocator, exportSchema)
	r := &rowBuilder{b: b, offset: b.Field(0).(*array.Int64Builder), ts: b.Field(1).(*array.TimestampBuilder),
		key: b.Field(2).(*array.BinaryBuilder), value: b.Field(3).(*array.BinaryBuilder), headers: b.Field(4).(*array.ListBuilder)}
	r.hdr = r.headers.ValueBuilder().(*array.StructBuilder)
	r.hkey = r.hdr.FieldBuilder(0).(*array.StringBuilder)
	r.hvalue = r.hdr.FieldBuilder(1).(*array.BinaryBuilder)
	return r
}

func appendBytes(b *array.BinaryBuilder, v []byte) {
	if v == nil {
		b.AppendNull()
		return
	}
	b.Append(v)
}

func (r *rowBuilder) add(rec record) {
	r.offset.Append(rec.Offset)
	r.ts.Append(arrow.Timestamp(rec.Timestamp))
	appendBytes(r.key, rec.Key)
	appendBytes(r.value, rec.Value)
	r.headers.Append(true)
	for _, h := range rec.Headers {
		r.hdr.Append(true)
		r.hkey.Append(h.Key)
		appendBytes(r.hvalue, h.Value)
	}
	r.n++
}

// flush writes the rows so far as one record batch.
func (r *rowBuilder) flush(w recordWriter) error {
	if r.n == 0 {
		return nil
	}
	rec := r.b.NewRecordBatch()
	defer rec.Release()
	r.n = 0
	if err := w.Write(rec); err != nil {
		return fmt.Errorf("export: write: %w", err)
	}
	return nil
}

func (e *env) writeRecords(ctx context.Context, t target, l *localLog, from, to wal.Offset, w recordWriter, p *progress) (int64, error) {
	rb := newRowBuilder()
	defer rb.b.Release()
	var rows int64
	err := e.eachBatch(ctx, t, l, from, to, func(batch []byte) error {
		var werr error
		err := eachRecord(batch, func(rec record) bool {
			if rec.Offset < int64(from) {
				return true
			}
			if rec.Offset >= int64(to) {
				werr = errEnough
				return false
			}
			rb.add(rec)
			rows++
			if rb.n == exportRows {
				if werr = rb.flush(w); werr != nil {
					return false
				}
			}
			p.set(rec.Offset - int64(from) + 1)
			return true
		})
		if err != nil {
			return err
		}
		return werr
	})
	if err != nil {
		return 0, err
	}
	if err := rb.flush(w); err != nil {
		return 0, err
	}
	if rows == 0 {
		// An empty file still carries the schema: write one empty batch.
		rec := rb.b.NewRecordBatch()
		defer rec.Release()
		if err := w.Write(rec); err != nil {
			return 0, fmt.Errorf("export: write: %w", err)
		}
	}
	return rows, nil
}
