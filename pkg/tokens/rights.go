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

// ParseRightsTable reads a table RightsTable rendered (as docs/security.md keeps it) back
// into, for each route, the roles whose tokens may open it: the docs' own statement of
// the rights, which a door's test walks its routes against.
func ParseRightsTable(table string) (map[string]map[Role]bool, error) {
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) < 2 {
		return nil, fmt.Errorf("rights table: %d lines, want a header and a rule at least", len(lines))
	}
	head := strings.Split(strings.Trim(lines[0], "| "), " | ")
	out := map[string]map[Role]bool{}
	for _, l := range lines[2:] {
		cells := strings.Split(strings.Trim(l, "| "), " | ")
		if len(cells) != len(head) || len(head) < 2 {
			return nil, fmt.Errorf("rights table: row %q has %d cells, the header %d", l, len(cells), len(head))
		}
		route := strings.Trim(cells[0], "`")
		out[route] = map[Role]bool{}
		for i, r := range head[1 : len(head)-1] {
			switch cells[1+i] {
			case "yes":
				out[route][Role(r)] = true
			case "no":
			default:
				return nil, fmt.Errorf("rights table: %s for %s reads %q, want yes or no", route, r, cells[1+i])
			}
		}
	}
	return out, nil
}
