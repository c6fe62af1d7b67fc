package open

// open.go owns URL, the one place that knows every implementation.

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/file"
	"github.com/sluice-mq/sluice/tier/objstore/mem"
	"github.com/sluice-mq/sluice/tier/objstore/s3"
)

// URL opens the store rawURL names (see the package doc). opts applies to
// the stores that use it (s3: timeout, attempts, credentials, logger).
func URL(ctx context.Context, rawURL string, opts objstore.Options) (objstore.Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("objstore: open: %w", err)
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("objstore: open %s: %w", u.Redacted(), err)
	}
	switch u.Scheme {
	case "file":
		if (u.Host != "" && u.Host != "localhost") || u.RawQuery != "" || u.User != nil {
			return nil, fmt.Errorf("objstore: open %q: want file:///absolute/path", rawURL)
		}
		if u.Path == "" || !filepath.IsAbs(filepath.FromSlash(u.Path)) {
			return nil, fmt.Errorf("objstore: open %q: the path must be absolute (file:///abs/path)", rawURL)
		}
		s, err := file.New(filepath.FromSlash(u.Path))
		if err != nil {
			return nil, fmt.Errorf("objstore: open %q: %w", rawURL, err)
		}
		return s, nil
	case "s3":
		cfg, err := s3.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("objstore: open: %w", err)
		}
		s, err := s3.New(ctx, cfg, opts)
		if err != nil {
			return nil, fmt.Errorf("objstore: open %s: %w", u.Redacted(), err)
		}
		return s, nil
	case "mem":
		if u.Host != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Opaque != "" {
			return nil, fmt.Errorf("objstore: open %q: mem:// takes no name (every open is a new, empty store)", rawURL)
		}
		return mem.New(), nil
	case "":
		return nil, fmt.Errorf("objstore: open %q: no scheme (want file://, s3:// or mem://)", rawURL)
	default:
		return nil, fmt.Errorf("objstore: open %q: unknown scheme %q (want file, s3 or mem)", rawURL, u.Scheme)
	}
}
