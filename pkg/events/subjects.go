package events

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/ident"
)

// SubjectRoot is the first token of every tribunal subject; the stream captures
// SubjectRoot + ".>".
const SubjectRoot = "tribunal"

// DeadLetterPrefix is where messages that keep failing go, per service. The leading
// underscore cannot start a tenant name, so no team can publish or read there.
const DeadLetterPrefix = SubjectRoot + "._dlq"

// ValidateTenant accepts lowercase names of letters, digits, '-' and '_' (at most 63),
// starting with a letter or digit: no dots, wildcards, spaces or upper case, because a
// tenant is a subject token, a blob key prefix and a NATS user name.
func ValidateTenant(t string) error {
	if !ident.Tenant(t) {
		return fmt.Errorf("tenant %q: want 1-63 of [a-z0-9_-] starting with a letter or digit (no dots, wildcards or spaces)", t)
	}
	if slices.Contains(ReservedTenants, t) {
		return fmt.Errorf("tenant %q: reserved, it names part of the service itself (reserved: %s)", t, strings.Join(ReservedTenants, ", "))
	}
	return nil
}

// ReservedTenants are names no team may take. A tenant's name becomes part of the
// services' durable names ("tribunal-<service>-<tenant>" with --tenants), and "dlq" made
// one of them the aggregator's dead-letter durable ("tribunal-aggregator-dlq"): a team
// of that name was accepted and never served. pkg/bus's tests hold this list to every
// durable name the services use. Subjects, keys and blob paths cannot collide (a tenant
// starts with a letter or digit, the dead-letter subjects with "_").
var ReservedTenants = []string{"dlq"}

// ValidateName accepts batch and AC ids: letters, digits, '-' and '_', at most 128,
// because they become key-value keys.
func ValidateName(n string) error {
	if !ident.Name(n) {
		return fmt.Errorf("%q: want 1-128 of [A-Za-z0-9_-] starting with a letter or digit", n)
	}
	return nil
}

// Subject returns "tribunal.<tenant>.<type>".
func Subject(tenant string, t Type) (string, error) {
	if err := ValidateTenant(tenant); err != nil {
		return "", err
	}
	if !t.Known() {
		return "", fmt.Errorf("%w: %q", ErrUnknownType, t)
	}
	return SubjectRoot + "." + tenant + "." + string(t), nil
}

// AnyTenant returns the subject filter that matches type t for every tenant.
func AnyTenant(t Type) string { return SubjectRoot + ".*." + string(t) }

// TenantAll returns the filter for every subject of one tenant.
func TenantAll(tenant string) string { return SubjectRoot + "." + tenant + ".>" }

// ParseSubject splits "tribunal.<tenant>.<type>".
func ParseSubject(subject string) (tenant string, t Type, err error) {
	parts := strings.SplitN(subject, ".", 3)
	if len(parts) != 3 || parts[0] != SubjectRoot {
		return "", "", fmt.Errorf("subject %q: not tribunal.<tenant>.<type>", subject)
	}
	if err := ValidateTenant(parts[1]); err != nil {
		return "", "", fmt.Errorf("subject %q: %w", subject, err)
	}
	t = Type(parts[2])
	if !t.Known() {
		return "", "", fmt.Errorf("subject %q: %w", subject, ErrUnknownType)
	}
	return parts[1], t, nil
}

// SubjectTemplate is subject with its tenant replaced by "{tenant}"
// ("tribunal.{tenant}.render.requested"), the low-cardinality destination that span
// names and messaging.destination.template carry: one name per event type however many
// teams there are. Any other subject (a dead letter's names one of the four services) is
// its own template.
func SubjectTemplate(subject string) string {
	if _, t, err := ParseSubject(subject); err == nil {
		return SubjectRoot + ".{tenant}." + string(t)
	}
	return subject
}

// DeadLetterSubject is the dead-letter subject of one service.
func DeadLetterSubject(service string) string { return DeadLetterPrefix + "." + service }

// Reasons CheckOrigin gives for an event that does not belong to its subject. They are
// fixed words, fit for a metric label.
const (
	OriginSubject = "subject_invalid" // the subject is not tribunal.<tenant>.<type>
	OriginTenant  = "subject_tenant"  // the envelope names another tenant than the subject
	OriginType    = "subject_type"    // the envelope names another type than the subject
)

// OriginError says why an event does not belong to the subject it arrived on.
type OriginError struct {
	// Reason is OriginSubject, OriginTenant or OriginType.
	Reason  string
	Subject string
	Tenant  string
	Type    Type
	Err     error
}

func (e *OriginError) Error() string {
	if e.Reason == OriginSubject {
		return fmt.Sprintf("a %s of tenant %q arrived on %s: %v", e.Type, e.Tenant, e.Subject, e.Err)
	}
	return fmt.Sprintf("a %s of tenant %q arrived on %s", e.Type, e.Tenant, e.Subject)
}

// CheckOrigin reports, as an *OriginError, an event whose envelope names another tenant
// or type than the subject it arrived on. The subject is what NATS permissions govern
// and what consumers are filtered by; an envelope is only what its writer claims, so no
// consumer acts on one its subject contradicts.
func CheckOrigin(subject, tenant string, t Type) error {
	st, typ, err := ParseSubject(subject)
	switch {
	case err != nil:
		return &OriginError{Reason: OriginSubject, Subject: subject, Tenant: tenant, Type: t, Err: err}
	case st != tenant:
		return &OriginError{Reason: OriginTenant, Subject: subject, Tenant: tenant, Type: t}
	case typ != t:
		return &OriginError{Reason: OriginType, Subject: subject, Tenant: tenant, Type: t}
	}
	return nil
}
