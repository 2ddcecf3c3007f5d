package tenants

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the users table of docs/security.md from tenants.Grants")

const securityDoc = "../../docs/security.md"

// TestSecurityDoc: the users table of docs/security.md is the authorization Generate
// writes. The table is read back (ParseRights) and expanded for two teams, and every
// user's rights must be exactly those of Generate's Permissions and of the config text
// it writes; the table's text must also be what RightsTable renders now, so a changed
// reason shows too. `go test ./pkg/tenants -run TestSecurityDoc -update` rewrites the
// table.
func TestSecurityDoc(t *testing.T) {
	data, err := os.ReadFile(securityDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	begin, end := strings.Index(doc, RightsBegin), strings.Index(doc, RightsEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s has no users table between %q and %q", securityDoc, RightsBegin, RightsEnd)
	}
	table := strings.TrimSpace(doc[begin+len(RightsBegin) : end])
	want := RightsTable(Grants("TRIBUNAL"))
	if *update {
		doc = doc[:begin+len(RightsBegin)] + "\n" + want + doc[end:]
		if err := os.WriteFile(securityDoc, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	const how = "update it with `go test ./pkg/tenants -run TestSecurityDoc -update`"

	teams := []string{"team-a", "team-b"}
	g, err := Generate(teams, Options{})
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := ParseRights(table)
	if err != nil {
		t.Fatalf("%s: %v (%s)", securityDoc, err, how)
	}
	documented := expand(parsed, teams)
	written := configRights(t, g.Config)
	for _, user := range users() {
		for _, dir := range []struct {
			name                   string
			doc, generated, config []string
		}{
			{"publish", documented[user].Publish, g.Permissions[user].Publish, written[user].Publish},
			{"subscribe", documented[user].Subscribe, g.Permissions[user].Subscribe, written[user].Subscribe},
		} {
			if missing, extra := diff(dir.doc, dir.generated); len(missing)+len(extra) > 0 {
				t.Errorf("%s may %s, by Generate but not by %s: %v\nby %s but not by Generate: %v\n(%s)", user, dir.name, securityDoc, missing, securityDoc, extra, how)
			}
			if missing, extra := diff(dir.config, dir.generated); len(missing)+len(extra) > 0 {
				t.Errorf("%s's %s rights in the config text differ from Permissions: missing %v, extra %v", user, dir.name, missing, extra)
			}
		}
	}
	for user := range documented {
		if !slices.Contains(users(), user) {
			t.Errorf("%s names a user Generate does not write: %s (%s)", securityDoc, user, how)
		}
	}
	if table != strings.TrimSpace(want) {
		t.Errorf("the users table of %s is not what tenants.Grants renders; %s. It differs at:\n%s", securityDoc, how, firstDiff(table, want))
	}
}

// configRights reads every user's rights back from the config text.
func configRights(t *testing.T, config string) map[string]Permissions {
	t.Helper()
	re := regexp.MustCompile(`(?s)user: ("[^"]+").*?publish: \{ allow: (\[.*?\]) \}\s*subscribe: \{ allow: (\[.*?\]) \}`)
	out := map[string]Permissions{}
	for _, m := range re.FindAllStringSubmatch(config, -1) {
		var user string
		var p Permissions
		for i, v := range []any{&user, &p.Publish, &p.Subscribe} {
			if err := json.Unmarshal([]byte(m[i+1]), v); err != nil {
				t.Fatalf("config: %v in %s", err, m[i+1])
			}
		}
		out[user] = p
	}
	if len(out) != len(users()) {
		t.Fatalf("config names %d users, want %d", len(out), len(users()))
	}
	return out
}

// diff is what want has and got lacks, and what got has beyond want.
func diff(got, want []string) (missing, extra []string) {
	for _, s := range want {
		if !slices.Contains(got, s) {
			missing = append(missing, s)
		}
	}
	for _, s := range got {
		if !slices.Contains(want, s) {
			extra = append(extra, s)
		}
	}
	return missing, extra
}

// firstDiff shows the first line where two texts differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(strings.TrimSpace(want), "\n")
	for i := range max(len(g), len(w)) {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d of the table\n  the document: %s\n  Grants:       %s", i+1, a, b)
		}
	}
	return "(nothing)"
}
