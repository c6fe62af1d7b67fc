package mem_test

import (
	"testing"
	"time"

	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/mem"
	"github.com/sluice-mq/sluice/tier/objstore/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) objstore.Store { return mem.New() })
}

func TestClock(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	s := mem.NewWithClock(func() time.Time { return at })
	if err := s.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	info, err := s.Head(t.Context(), "k")
	if err != nil || !info.Modified.Equal(at) {
		t.Fatalf("Head = %+v, %v; want Modified %v", info, err, at)
	}
}

func TestMultipartConformance(t *testing.T) {
	storetest.RunMultipart(t, func(*testing.T) objstore.Store { return mem.New() })
}
