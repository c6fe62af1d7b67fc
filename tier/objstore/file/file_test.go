package file_test

import (
	"testing"

	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/file"
	"github.com/sluice-mq/sluice/tier/objstore/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store {
		s, err := file.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
