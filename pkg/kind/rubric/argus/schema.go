package argus

import (
	"bytes"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/tribunal-dev/tribunal/schemas"
)

// The seed's schemas (schemas/argus), compiled once. tribunal's parsers are stricter and
// say more (cross-references, file paths, duplicate keys); the schemas are the contract
// documents written for Argus are held to, so every document a parser accepts is also
// checked against its schema.
var (
	specSchema       = mustSchema("spec.schema.json", schemas.ArgusSpec)
	rubricSchema     = mustSchema("rubric.schema.json", schemas.ArgusRubric)
	verdictSchema    = mustSchema("verdict.schema.json", schemas.ArgusVerdict)
	gateResultSchema = mustSchema("gate-result.schema.json", schemas.ArgusGateResult)
)

func mustSchema(name string, data []byte) *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		panic(fmt.Sprintf("embedded schema %s: %v", name, err))
	}
	c := jsonschema.NewCompiler()
	url := "https://tribunal.invalid/schemas/argus/" + name
	if err := c.AddResource(url, doc); err != nil {
		panic(fmt.Sprintf("embedded schema %s: %v", name, err))
	}
	s, err := c.Compile(url)
	if err != nil {
		panic(fmt.Sprintf("embedded schema %s: %v", name, err))
	}
	return s
}

// schemaPrinter renders schema errors in English.
var schemaPrinter = message.NewPrinter(language.English)

// SchemaViolation is one place where a document breaks its schema.
type SchemaViolation struct {
	// Path is the instance location in tribunal's path notation ("targets[0].route",
	// "(root)" for the document itself).
	Path string
	// Message is the schema library's description.
	Message string
}

// checkSchema validates a JSON document against s and returns its violations, the
// innermost ones, in path order. A document that is not JSON is one violation at the root.
func checkSchema(s *jsonschema.Schema, data []byte) []SchemaViolation {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return []SchemaViolation{{Path: "(root)", Message: "not JSON: " + err.Error()}}
	}
	err = s.Validate(doc)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return []SchemaViolation{{Path: "(root)", Message: err.Error()}}
	}
	var out []SchemaViolation
	for _, leaf := range schemas.Leaves(ve) {
		out = append(out, SchemaViolation{Path: schemas.FieldPath(leaf.InstanceLocation, "(root)"), Message: leaf.ErrorKind.LocalizedString(schemaPrinter)})
	}
	return out
}
