// Package ident says which strings may name a tenant, a batch or AC id, and a content
// digest. Every event and every blob reference is checked against these on each hop, so
// they are byte loops: a regular expression per check was 5 % of the all-in-one mode's
// CPU profile, and a loop says the same thing.
package ident

// Tenant reports whether s matches ^[a-z0-9][a-z0-9_-]{0,62}$: a tenant is a subject
// token, a blob key prefix and a NATS user name, so no dots, wildcards, spaces or upper
// case.
func Tenant(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '_' || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Name reports whether s matches ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$: batch and AC ids
// become key-value keys.
func Name(s string) bool {
	if len(s) == 0 || len(s) > 128 || s[0] == '_' || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// HexDigest reports whether s matches ^[0-9a-f]{64}$: a SHA-256 in lowercase hex.
func HexDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
