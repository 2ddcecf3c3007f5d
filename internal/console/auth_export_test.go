package console

import "github.com/tribunal-dev/tribunal/pkg/tokens"

// What the external tests read of the console's rights: its routes' patterns and roles,
// the table docs/security.md holds, and its markers.
var (
	RightsTable            = rightsTable
	RightsBegin, RightsEnd = rightsBegin, rightsEnd
)

// RouteRights is one route's pattern and the roles that may open it.
type RouteRights struct {
	Pattern string
	Roles   []tokens.Role
	// Open says the route needs no token.
	Open bool
}

// Routes are the console's routes as its mux has them.
func Routes() []RouteRights {
	var out []RouteRights
	for _, rt := range (&server{}).routes() {
		out = append(out, RouteRights{Pattern: rt.Pattern, Roles: rt.Roles, Open: rt.open != nil})
	}
	return out
}
