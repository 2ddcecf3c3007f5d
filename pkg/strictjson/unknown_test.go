package strictjson

import "testing"

func TestUnknownNamesTheFirstForeignKeyInDocumentOrder(t *testing.T) {
	known := []string{"a", "b"}
	hints := map[string]string{"z": "unknown field (the contract calls it a)"}
	for _, tc := range []struct {
		name, in, key, reason string
		ok                    bool
	}{
		{name: "all known", in: `{"b":1,"a":2}`},
		{name: "unknown", in: `{"a":1,"y":2,"z":3}`, key: "y", reason: "unknown field", ok: true},
		{name: "hinted", in: `{"z":1,"y":2}`, key: "z", reason: "unknown field (the contract calls it a)", ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Decode([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			key, reason, ok := o.Unknown(known, hints)
			if key != tc.key || reason != tc.reason || ok != tc.ok {
				t.Fatalf("Unknown = %q, %q, %v; want %q, %q, %v", key, reason, ok, tc.key, tc.reason, tc.ok)
			}
		})
	}
}
