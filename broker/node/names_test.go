package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/meta"
)

func TestQualifyName(t *testing.T) {
	tests := []struct {
		tenant, name, internal string
	}{
		{meta.DefaultTenant, "orders", "orders"},
		{meta.DefaultTenant, "", ""},
		{meta.DefaultTenant, "a~b", "default~a~b"}, // a group id with '~' is not tenant a's
		{meta.DefaultTenant, "~", "default~~"},
		{"acme", "orders", "acme~orders"},
		{"acme", "", "acme~"},
		{"acme", "my~group", "acme~my~group"},
		{meta.SystemTenant, "audit", "system~audit"},
	}
	for _, tt := range tests {
		t.Run(tt.tenant+"/"+tt.name, func(t *testing.T) {
			if got := QualifyName(tt.tenant, tt.name); got != tt.internal {
				t.Fatalf("QualifyName(%q, %q) = %q, want %q", tt.tenant, tt.name, got, tt.internal)
			}
			tenant, name := SplitName(tt.internal)
			if tenant != tt.tenant || name != tt.name {
				t.Fatalf("SplitName(%q) = (%q, %q), want (%q, %q)", tt.internal, tenant, name, tt.tenant, tt.name)
			}
		})
	}
}

func TestValidateQualifiedTopicName(t *testing.T) {
	long := strings.Repeat("a", 64)
	tests := []struct {
		name string
		ok   bool
	}{
		{"orders", true},
		{"acme~orders", true},
		{"system~audit", true},
		{long + "~" + strings.Repeat("x", maxTopicNameLen-65), true},
		{long + "~" + strings.Repeat("x", maxTopicNameLen-64), false}, // 250 with the tenant
		{"default~orders", false},                                     // a second spelling of "orders"
		{"acme~", false},
		{"~orders", false},
		{"Acme~orders", false},
		{"1acme~orders", false},
		{"acme~my~orders", false}, // the local part holds '~'
		{"acme~..", false},
		{"acme~or ders", false},
		{strings.Repeat("a", 65) + "~orders", false}, // tenant names are at most 64
	}
	for _, tt := range tests {
		err := ValidateQualifiedTopicName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateQualifiedTopicName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, errInvalidTopic) {
			t.Errorf("ValidateQualifiedTopicName(%q) = %v, want errInvalidTopic (INVALID_TOPIC_EXCEPTION)", tt.name, err)
		}
	}
}

// FuzzQualifySplit: SplitName undoes QualifyName for every valid tenant and
// every name, and distinct pairs never share an internal name; a valid
// qualified topic name is canonical.
func FuzzQualifySplit(f *testing.F) {
	for _, s := range [][2]string{{"default", "orders"}, {"acme", "a~b"}, {"default", "~"}, {"b", ""}} {
		f.Add(s[0], s[1], "other")
	}
	f.Fuzz(func(t *testing.T, tenant, name, other string) {
		if meta.ValidateTenantName(tenant) != nil {
			tenant = meta.DefaultTenant
		}
		internal := QualifyName(tenant, name)
		gotTenant, gotName := SplitName(internal)
		if gotTenant != tenant || gotName != name {
			t.Fatalf("SplitName(QualifyName(%q, %q)) = (%q, %q)", tenant, name, gotTenant, gotName)
		}
		if meta.ValidateTenantName(other) == nil && other != tenant && QualifyName(other, name) == internal {
			t.Fatalf("tenants %q and %q share the internal name %q", tenant, other, internal)
		}
		// Any string: a valid topic name is its own canonical spelling.
		if ValidateQualifiedTopicName(name) == nil {
			if back := QualifyName(SplitName(name)); back != name {
				t.Fatalf("valid topic name %q is not canonical: re-qualified as %q", name, back)
			}
		}
	})
}
