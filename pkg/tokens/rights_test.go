package tokens

import "testing"

// TestRightsTable: a row per route, a column per role, in Roles' order.
func TestRightsTable(t *testing.T) {
	got := RightsTable("route", []Right{
		{Pattern: "GET /a", Roles: []Role{RoleTeam}, What: "the team's"},
		{Pattern: "GET /b", Roles: []Role{RoleTeam, RoleReviewer}, What: "both"},
	})
	want := "| route | team | reviewer | what |\n|---|---|---|---|\n" +
		"| `GET /a` | yes | no | the team's |\n" +
		"| `GET /b` | yes | yes | both |\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
