package canary

// This file owns the business store: one result per id in a bbolt file
// (format in doc.go), and beside the results the mark a run leaves for the
// next (availability.go). Invariant: Put of an id already stored changes
// nothing and reports a duplicate; a batch of Puts is durable (one fsynced
// transaction) before PutBatch returns, so before the offsets past it are
// committed; a mark of a version this code does not know is never taken
// for one it does.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

var (
	resultsBucket = []byte("results")
	stateBucket   = []byte("state")
	markKey       = []byte("mark")
)

// resultLen is the size of a stored result: partition, offset, written ns.
const resultLen = 4 + 8 + 8

// Sink is the canary's business store.
type Sink struct {
	db *bolt.DB
}

// OpenSink opens (or creates) the store at dir/results.db.
func OpenSink(dir string) (*Sink, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("canary: %w", err)
	}
	db, err := bolt.Open(filepath.Join(dir, "results.db"), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("canary: open results: %w", err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(resultsBucket); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(stateBucket)
		return err
	}); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("canary: open results: %w", err)
	}
	return &Sink{db: db}, nil
}

// Close closes the store.
func (s *Sink) Close() error { return s.db.Close() }

// Put is one result to write.
type Put struct {
	ID string
	Result
}

// PutBatch writes every result whose id is not stored yet, in one
// transaction, and returns, per put, whether its id was stored already (a
// duplicate, left unchanged).
func (s *Sink) PutBatch(puts []Put, now time.Time) ([]bool, error) {
	dups := make([]bool, len(puts))
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(resultsBucket)
		for i, p := range puts {
			if b.Get([]byte(p.ID)) != nil {
				dups[i] = true
				continue
			}
			if err := b.Put([]byte(p.ID), encodeResult(p.Result, now)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("canary: write results: %w", err)
	}
	return dups, nil
}

// Get is the stored result of id (a Lookup).
func (s *Sink) Get(id string) (Result, bool) {
	var (
		r  Result
		ok bool
	)
	_ = s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(resultsBucket).Get([]byte(id)); v != nil {
			var err error
			r, _, err = decodeResult(v)
			ok = err == nil
		}
		return nil
	})
	return r, ok
}

// Prune deletes the results written before cutoff and returns how many.
func (s *Sink) Prune(cutoff time.Time) (int, error) {
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(resultsBucket).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			_, at, err := decodeResult(v)
			if err != nil || at.Before(cutoff) {
				if err := c.Delete(); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	return n, err
}

func encodeResult(r Result, at time.Time) []byte {
	v := make([]byte, resultLen)
	binary.BigEndian.PutUint32(v, uint32(r.Partition))
	binary.BigEndian.PutUint64(v[4:], uint64(r.Offset))
	binary.BigEndian.PutUint64(v[12:], uint64(at.UnixNano()))
	return v
}

var errBadResult = errors.New("canary: stored result is not 20 bytes")

func decodeResult(v []byte) (Result, time.Time, error) {
	if len(v) != resultLen {
		return Result{}, time.Time{}, errBadResult
	}
	return Result{Partition: int32(binary.BigEndian.Uint32(v)), Offset: int64(binary.BigEndian.Uint64(v[4:]))},
		time.Unix(0, int64(binary.BigEndian.Uint64(v[12:]))), nil
}

// markLen is the size of a stored mark of markVersion: version, state,
// time (unix ns).
const (
	markVersion = 1
	markLen     = 1 + 1 + 8
)

// errMark marks a stored mark this code cannot read (a newer version, or
// not the length of its version).
var errMark = errors.New("canary: stored mark unreadable")

// saveMark replaces the stored mark with m (one fsynced transaction).
func (s *Sink) saveMark(m mark) error {
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(stateBucket).Put(markKey, encodeMark(m))
	}); err != nil {
		return fmt.Errorf("canary: save mark: %w", err)
	}
	return nil
}

// loadMark is the stored mark; its state is markNone when none is stored.
// A mark it cannot read is an error wrapping errMark (the caller takes
// over nothing; the next saveMark replaces it).
func (s *Sink) loadMark() (mark, error) {
	var (
		m   mark
		err error
	)
	if verr := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(stateBucket).Get(markKey); v != nil {
			m, err = decodeMark(v)
		}
		return nil
	}); verr != nil {
		return mark{}, fmt.Errorf("canary: load mark: %w", verr)
	}
	return m, err
}

func encodeMark(m mark) []byte {
	v := make([]byte, markLen)
	v[0] = markVersion
	v[1] = byte(m.state)
	binary.BigEndian.PutUint64(v[2:], uint64(m.at.UnixNano()))
	return v
}

func decodeMark(v []byte) (mark, error) {
	switch {
	case len(v) == 0:
		return mark{}, fmt.Errorf("%w: empty", errMark)
	case v[0] != markVersion:
		return mark{}, fmt.Errorf("%w: version %d, this broker reads %d", errMark, v[0], markVersion)
	case len(v) != markLen:
		return mark{}, fmt.Errorf("%w: %d bytes, version %d has %d", errMark, len(v), markVersion, markLen)
	}
	st := markState(v[1])
	if st != markUp && st != markDown && st != markStopped {
		return mark{}, fmt.Errorf("%w: state %d", errMark, v[1])
	}
	return mark{state: st, at: time.Unix(0, int64(binary.BigEndian.Uint64(v[2:])))}, nil
}
