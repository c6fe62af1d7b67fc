package quota_test

import (
	"sync"
	"testing"

	"github.com/sluice-mq/sluice/broker/quota"
)

func TestTableDefaultsAndReplace(t *testing.T) {
	tb := quota.NewTable()
	if l := tb.Limits("acme"); l != nil {
		t.Fatalf("a new table limits acme: %v", l)
	}
	if w, c := tb.Scheduling("acme"); w != 1 || c != quota.ClassStandard {
		t.Fatalf("Scheduling of an unknown tenant = %v, %q", w, c)
	}
	// Readers never block or see a torn entry while the table changes.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				l := tb.Limits("acme")
				if v, ok := l.Get(quota.Topics); ok && (v < 1 || v > 100) {
					t.Errorf("read topics = %v, never published", v)
				}
				if w, c := tb.Scheduling("acme"); w != 1 && c != quota.ClassLow {
					t.Errorf("read weight %v with class %q, never published", w, c)
				}
			}
		}()
	}
	for i := 1; i <= 100; i++ {
		tb.Replace(int64(i), map[string]quota.Entry{"acme": {Limits: quota.Limits{quota.Topics: float64(i)}, Weight: float64(i), Class: quota.ClassLow}})
	}
	close(stop)
	wg.Wait()
	if w, c := tb.Scheduling("acme"); w != 100 || c != quota.ClassLow || tb.Revision() != 100 {
		t.Fatalf("after the last Replace: %v, %q, revision %d", w, c, tb.Revision())
	}
}
