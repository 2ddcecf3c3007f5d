// Package attack is the attack suite of issue 12 ("teams are adversaries"): every attempt
// a team can make on a shared tribunal, run against a real nats-server configured with
// the authorization `tribunal tenants team-a team-b` writes, with the four services each
// on its own least-privilege NATS user and the ingress in front of them. Each attack is a
// test that fails for the attacker and leaves the victim's batch complete with a clean
// audit; its comment names how it succeeded on f5dc4e7, before this work, and where that
// is cheap a test runs it against f5dc4e7's kind of authorization (one NATS user per
// team) to show the path was real.
//
// Run it with `go test ./internal/attack/` (docs/security.md).
package attack
