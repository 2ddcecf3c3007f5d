package tokens

import (
	"fmt"
	"slices"
	"strings"
)

// Right is one route of a door (the ingress, the console) and the roles whose tokens may
// open it: a row of the rights tables docs/security.md lists, each generated from its
// door's own routes so that what the docs say and what the door serves are one list.
type Right struct {
	// Pattern is the route as http.ServeMux reads it ("GET /v1/batches/{batch}").
	Pattern string
	// Roles may open it; a token of any other role is refused 403.
	Roles []Role
	// What says what it serves, and why those roles.
	What string
}

// Allows reports whether a token of role may open the route.
func (r Right) Allows(role Role) bool { return slices.Contains(r.Roles, role) }

// RightsTable renders rights as a Markdown table: a row per route (its first column
// headed first), a column per role ("yes" or "no"), and what it serves.
func RightsTable(first string, rights []Right) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "| %s |", first)
	for _, r := range Roles {
		fmt.Fprintf(&sb, " %s |", r)
	}
	sb.WriteString(" what |\n|---|")
	for range Roles {
		sb.WriteString("---|")
	}
	sb.WriteString("---|\n")
	for _, rt := range rights {
		fmt.Fprintf(&sb, "| `%s` |", rt.Pattern)
		for _, r := range Roles {
			may := "no"
			if rt.Allows(r) {
				may = "yes"
			}
			fmt.Fprintf(&sb, " %s |", may)
		}
		fmt.Fprintf(&sb, " %s |\n", rt.What)
	}
	return sb.String()
}
