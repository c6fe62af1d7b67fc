package s3

// config.go owns Config, parsed from an s3:// URL.

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/sluice-mq/sluice/tier/objstore"
)

// Config names where a Store keeps its objects.
type Config struct {
	Bucket   string
	Prefix   string // "" or a valid key followed by '/': prepended to every key
	Endpoint string // "" for AWS, else the service's base URL (http://host:port)
	Region   string // "" for the AWS environment's, else us-east-1
}

// ParseURL parses s3://bucket[/prefix][?endpoint=URL&region=NAME].
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("s3: parse url: %w", err)
	}
	if u.Scheme != "s3" {
		return Config{}, fmt.Errorf("s3: url %q: scheme is not s3", raw)
	}
	if u.User != nil {
		return Config{}, fmt.Errorf("s3: url %q: credentials do not belong in the url; use the AWS environment", u.Redacted())
	}
	cfg := Config{Bucket: u.Host}
	if p := strings.Trim(u.Path, "/"); p != "" {
		cfg.Prefix = p + "/"
	}
	for name, values := range u.Query() {
		if len(values) != 1 {
			return Config{}, fmt.Errorf("s3: url %q: parameter %s given %d times", raw, name, len(values))
		}
		switch name {
		case "endpoint":
			cfg.Endpoint = values[0]
		case "region":
			cfg.Region = values[0]
		default:
			return Config{}, fmt.Errorf("s3: url %q: unknown parameter %q (want endpoint, region)", raw, name)
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("s3: url %q: %w", raw, err)
	}
	return cfg, nil
}

// Validate reports a Config no Store can use.
func (c Config) Validate() error {
	if c.Bucket == "" {
		return fmt.Errorf("no bucket")
	}
	if c.Prefix != "" {
		if !strings.HasSuffix(c.Prefix, "/") {
			return fmt.Errorf("prefix %q does not end with '/'", c.Prefix)
		}
		if err := objstore.ValidKey(strings.TrimSuffix(c.Prefix, "/")); err != nil {
			return fmt.Errorf("prefix: %w", err)
		}
	}
	if c.Endpoint != "" {
		e, err := url.Parse(c.Endpoint)
		if err != nil {
			return fmt.Errorf("endpoint: %w", err)
		}
		if (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return fmt.Errorf("endpoint %q is not an http or https URL with a host", c.Endpoint)
		}
	}
	return nil
}

// URL returns the s3:// URL that ParseURL turns back into c.
func (c Config) URL() string {
	u := url.URL{Scheme: "s3", Host: c.Bucket, Path: "/" + c.Prefix}
	q := url.Values{}
	if c.Endpoint != "" {
		q.Set("endpoint", c.Endpoint)
	}
	if c.Region != "" {
		q.Set("region", c.Region)
	}
	u.RawQuery = q.Encode()
	return u.String()
}
