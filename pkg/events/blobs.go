package events

import (
	"reflect"
	"strconv"
	"strings"
)

// BlobField is one blob a payload references, with the field that holds it in the wire
// schema's names ("spec.ab.ours.blob", "spec.rubric.spec_json").
type BlobField struct {
	Field string
	Blob  Blob
}

var blobType = reflect.TypeFor[Blob]()

// Blobs lists every blob a payload references, wherever its kind keeps them, by walking
// the payload's wire fields. It needs no list of kinds, so a new kind's blobs are found
// without a change here: the ingress checks with it that a team submits only blobs it
// stored itself.
func Blobs(p Payload) []BlobField {
	var out []BlobField
	walkBlobs(reflect.ValueOf(p), "", &out)
	return out
}

func walkBlobs(v reflect.Value, path string, out *[]BlobField) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkBlobs(v.Elem(), path, out)
		}
	case reflect.Struct:
		if v.Type() == blobType {
			*out = append(*out, BlobField{Field: path, Blob: v.Interface().(Blob)})
			return
		}
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name := wireName(f)
			if f.Name == "KindPart" { // a kind's part travels under the kind's name
				name = v.FieldByName("Kind").String()
			}
			walkBlobs(v.Field(i), join(path, name), out)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walkBlobs(v.Index(i), path+"["+strconv.Itoa(i)+"]", out)
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			walkBlobs(iter.Value(), join(path, iter.Key().String()), out)
		}
	}
}

// wireName is a field's msgpack name, else its Go name in lower case.
func wireName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
	if name == "" || name == "-" {
		return strings.ToLower(f.Name)
	}
	return name
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
