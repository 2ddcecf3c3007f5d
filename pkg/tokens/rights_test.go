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

// TestParseRightsTable: what RightsTable renders reads back as its rights; a cell neither
// yes nor no is refused.
func TestParseRightsTable(t *testing.T) {
	got, err := ParseRightsTable(RightsTable("route", []Right{{Pattern: "GET /a", Roles: []Role{RoleTeam}, What: "x"}}))
	if err != nil || len(got) != 1 || !got["GET /a"][RoleTeam] || got["GET /a"][RoleReviewer] {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := ParseRightsTable("| route | team | reviewer | what |\n|---|---|---|---|\n| `GET /a` | maybe | no | x |"); err == nil {
		t.Fatal("a cell of maybe was read")
	}
}
