package node

// This file owns the internal form of a tenant's names: the one spelling of
// a topic, group or transactional id that etcd keys, the registry, metrics
// and logs use, whoever asked. A tenant's client never sees it (the Kafka
// front end's scope stage translates at the edge); a super user addresses
// topics and groups by it.
//
//	tenant "default", name without '~'   →  name            (orders)
//	any other tenant, or a name with '~' →  tenant~name     (acme~orders, default~a~b)
//
// '~' is not a legal character of a Kafka topic name, so a client can never
// create a qualified topic by hand, and the default tenant's topics (every
// topic from before tenants) keep their names. Tenant names cannot hold '~'
// (meta.ValidateTenantName), so the first '~' of an internal name always
// ends the tenant. Group and transactional ids may hold '~' in Kafka; a
// default-tenant id that does is qualified as "default~…" so it cannot be
// read as another tenant's.
//
// Invariant: SplitName(QualifyName(t, n)) == (t, n) for every tenant t that
// meta.ValidateTenantName accepts and every n, so two (tenant, name) pairs
// never share an internal name.
// Invariant: a stored topic name is canonical: QualifyName(SplitName(x)) == x
// (ValidateQualifiedTopicName refuses "default~orders", which would be a
// second spelling of "orders").

import (
	"fmt"
	"strings"

	"github.com/sluice-mq/sluice/meta"
)

// TenantSeparator ends the tenant part of an internal name.
const TenantSeparator = meta.TenantSeparator

// QualifyName returns the internal name of tenant's name.
func QualifyName(tenant, name string) string {
	if tenant == meta.DefaultTenant && !strings.ContainsRune(name, TenantSeparator) {
		return name
	}
	return tenant + string(TenantSeparator) + name
}

// SplitName returns the tenant and the tenant-local name of an internal
// name; a name without the separator is the default tenant's.
func SplitName(internal string) (tenant, name string) {
	tenant, name, ok := strings.Cut(internal, string(TenantSeparator))
	if !ok {
		return meta.DefaultTenant, internal
	}
	return tenant, name
}

// ValidateQualifiedTopicName reports whether internal is the canonical
// internal name of a topic: its local part obeys Kafka's rules
// (ValidateTopicName), its tenant part is a valid tenant name other than the
// default tenant (whose topics are unqualified), and the whole is at most
// 249 characters, Kafka's limit, so a qualified topic's data directory and
// etcd key stay within the bounds an unqualified one has.
func ValidateQualifiedTopicName(internal string) error {
	if len(internal) > maxTopicNameLen {
		return fmt.Errorf("%w: %d characters with its tenant, at most %d", errInvalidTopic, len(internal), maxTopicNameLen)
	}
	tenant, name := SplitName(internal)
	if err := ValidateTopicName(name); err != nil {
		return err
	}
	if name == internal {
		return nil // the default tenant's, unqualified
	}
	if tenant == meta.DefaultTenant {
		return fmt.Errorf("%w: %q: the default tenant's topics are unqualified", errInvalidTopic, internal)
	}
	if err := meta.ValidateTenantName(tenant); err != nil {
		return fmt.Errorf("%w: %q: tenant part: %w", errInvalidTopic, internal, err)
	}
	return nil
}

// LocalName returns the name tenant's clients use for the internal name,
// and false when internal is not tenant's in its canonical spelling (another
// tenant's, or a second spelling such as "default~orders" that only a super
// user can make): a front end then shows the tenant nothing of it.
func LocalName(tenant, internal string) (string, bool) {
	t, name := SplitName(internal)
	if t != tenant || QualifyName(t, name) != internal {
		return "", false
	}
	return name, true
}

// ScrubMessage readies a message about internal names for a client of
// tenant: the tenant's own prefix is removed where a name starts (at the
// beginning or after a character no tenant name holds). It reports false
// when a separator is still left: the message may name another tenant's
// resource, and the front end must not show it.
func ScrubMessage(msg, tenant string) (string, bool) {
	prefix := tenant + string(TenantSeparator)
	if !strings.Contains(msg, prefix) {
		return msg, !strings.ContainsRune(msg, TenantSeparator)
	}
	var b strings.Builder
	for i := 0; i < len(msg); {
		if strings.HasPrefix(msg[i:], prefix) && (i == 0 || !isTenantByte(msg[i-1])) {
			i += len(prefix)
			continue
		}
		b.WriteByte(msg[i])
		i++
	}
	out := b.String()
	return out, !strings.ContainsRune(out, TenantSeparator)
}

// isTenantByte reports whether c can be part of a tenant name
// (meta.ValidateTenantName).
func isTenantByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}
