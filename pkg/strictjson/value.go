package strictjson

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// treeOf builds the tree encoding/json would write for a value, without writing it: the
// aggregator re-checks every recorded answer, and the round trip through text was most
// of that check. ok is false for what it does not handle (a type with its own
// marshalling, an embedded struct, a ",string" field, a byte slice); the caller then
// goes through encoding/json.
func treeOf(v reflect.Value) (any, bool) {
	if !v.IsValid() {
		return nil, true
	}
	if v.Type().Implements(marshalerType) || v.Type().Implements(textMarshalerType) {
		return nil, false
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil, true
		}
		return treeOf(v.Elem())
	case reflect.String:
		return v.String(), true
	case reflect.Bool:
		return v.Bool(), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return json.Number(strconv.FormatInt(v.Int(), 10)), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return json.Number(strconv.FormatUint(v.Uint(), 10)), true
	case reflect.Float32, reflect.Float64:
		return json.Number(floatText(v.Float(), v.Type().Bits())), true
	case reflect.Slice:
		if v.IsNil() {
			return nil, true
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil, false
		}
		fallthrough
	case reflect.Array:
		out := make([]any, v.Len())
		for i := range out {
			e, ok := treeOf(v.Index(i))
			if !ok {
				return nil, false
			}
			out[i] = e
		}
		return out, true
	case reflect.Map:
		if v.IsNil() {
			return nil, true
		}
		if v.Type().Key().Kind() != reflect.String {
			return nil, false
		}
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		sort.Strings(keys)
		out := make(Members, 0, len(keys))
		for _, k := range keys {
			e, ok := treeOf(v.MapIndex(reflect.ValueOf(k).Convert(v.Type().Key())))
			if !ok {
				return nil, false
			}
			out = append(out, Member{Key: k, Val: e})
		}
		return out, true
	case reflect.Struct:
		t := v.Type()
		out := make(Members, 0, t.NumField())
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous {
				return nil, false
			}
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" && opts == "" {
				continue
			}
			if strings.Contains(","+opts+",", ",string,") {
				return nil, false
			}
			if name == "" {
				name = f.Name
			}
			fv := v.Field(i)
			if strings.Contains(","+opts+",", ",omitempty,") && empty(fv) {
				continue
			}
			e, ok := treeOf(fv)
			if !ok {
				return nil, false
			}
			out = append(out, Member{Key: name, Val: e})
		}
		return out, true
	}
	return nil, false
}

// floatText writes a float as encoding/json does: plain below 1e21 and from 1e-6, in
// exponent form outside, e-07 cleaned to e-7.
func floatText(f float64, bits int) string {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	var buf [32]byte
	b := strconv.AppendFloat(buf[:0], f, format, -1, bits)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return string(b)
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// empty is encoding/json's omitempty test.
func empty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// nonFinite finds the first NaN or infinite float in a value, by its JSON field path:
// encoding/json refuses to write one without saying where it is.
func nonFinite(v reflect.Value, path string) (string, string, bool) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return "", "", false
		}
		return nonFinite(v.Elem(), path)
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return path, strconv.FormatFloat(f, 'g', -1, 64), true
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if p, bad, ok := nonFinite(v.Field(i), JoinKey(path, name)); ok {
				return p, bad, true
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			if p, bad, ok := nonFinite(iter.Value(), JoinKey(path, fmt.Sprint(iter.Key()))); ok {
				return p, bad, true
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if p, bad, ok := nonFinite(v.Index(i), JoinIndex(path, i)); ok {
				return p, bad, true
			}
		}
	}
	return "", "", false
}
