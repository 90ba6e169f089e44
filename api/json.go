package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"sync"
)

// maxBody is the largest request body accepted.
const maxBody = 64 << 10

type errorBody struct {
	Error string `json:"error"`
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // reasons hold ">"
	_ = enc.Encode(v)        // the client went away; nothing to do
}

// writeError answers {"error": msg}.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: msg})
}

// httpError is a decode failure with the status it maps to.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

// decode reads a strict JSON body into v: application/json only, at most
// maxBody bytes, exactly one value, field names spelled exactly as
// documented (no case folding), no unknown fields and no key twice. A
// request without a body skips the Content-Type check and is told its body
// is empty.
func decode(w http.ResponseWriter, r *http.Request, v any) *httpError {
	if r.ContentLength != 0 {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			return &httpError{http.StatusUnsupportedMediaType, "Content-Type must be application/json"}
		}
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return decodeError(err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return decodeError(io.EOF)
	}
	// The common body is well formed and spelled right: decoding it and
	// scanning its keys once is enough. Anything else takes the careful
	// path, which names what is wrong.
	if json.Unmarshal(data, v) == nil && cleanKeys(data, reflect.TypeOf(v)) {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero() // what the first decode left
	keys := json.NewDecoder(bytes.NewReader(data))
	if err := checkKeys(keys, reflect.TypeOf(v), ""); err != nil {
		return err
	}
	if _, err := keys.Token(); !errors.Is(err, io.EOF) {
		return &httpError{http.StatusBadRequest, "body must hold a single JSON object"}
	}
	// checkKeys has refused unknown fields with our own message, so the
	// decoder needs no DisallowUnknownFields (whose error is untyped).
	if err := json.Unmarshal(data, v); err != nil {
		return decodeError(err)
	}
	return nil
}

// checkKeys reads one JSON value from dec and refuses a key that appears
// twice in one object, or that names no field of t exactly (encoding/json
// would match it case-insensitively), naming it after path, the keys of
// the objects it is in ("admission."). t may be nil where the shape is
// not known; type mismatches are left to the decoder.
func checkKeys(dec *json.Decoder, t reflect.Type, path string) *httpError {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return syntaxError(err)
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return syntaxError(err)
			}
			key := tok.(string) // an object's keys are strings
			if seen[key] {
				return &httpError{http.StatusBadRequest, fmt.Sprintf("duplicate field %q", path+key)}
			}
			seen[key] = true
			elem, ok := valueType(t, []byte(key))
			if !ok {
				return unknownField(t, path, key)
			}
			if err := checkKeys(dec, elem, path+key+"."); err != nil {
				return err
			}
		}
	case json.Delim('['):
		elem := elemType(t)
		for dec.More() {
			if err := checkKeys(dec, elem, path); err != nil {
				return err
			}
		}
	default:
		return nil // a scalar
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return syntaxError(err)
	}
	return nil
}

// syntaxError maps an error of json.Decoder.Token; an input that ends
// inside a value is not valid JSON.
func syntaxError(err error) *httpError {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return decodeError(err)
}

// valueType is the type of the value under key in an object of type t:
// the struct field whose JSON name is exactly key, a map's element type,
// or nil where t is nil or neither. It is false when t is a struct
// without that field. key is bytes so that cleanKeys looks it up without
// allocating.
func valueType(t reflect.Type, key []byte) (reflect.Type, bool) {
	switch {
	case t == nil:
		return nil, true
	case t.Kind() == reflect.Struct:
		f, ok := jsonFields(t)[string(key)]
		return f, ok
	case t.Kind() == reflect.Map:
		return t.Elem(), true
	}
	return nil, true
}

// elemType is the element type of an array of type t, nil where t is not
// a slice or an array.
func elemType(t reflect.Type) reflect.Type {
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		return t.Elem()
	}
	return nil
}

// fieldsByType caches jsonFields: a body type's fields are looked up for
// every key of every request.
var fieldsByType sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields maps the JSON names of struct t's exported fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldsByType.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for f := range t.Fields() {
		if n := jsonName(f); n != "-" && f.IsExported() {
			m[n] = f.Type
		}
	}
	fieldsByType.Store(t, m)
	return m
}

func jsonName(f reflect.StructField) string {
	tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if tag == "" {
		return f.Name
	}
	return tag
}

// unknownField names key after path and, when it differs only in case
// from a field, the field's spelling.
func unknownField(t reflect.Type, path, key string) *httpError {
	msg := fmt.Sprintf("unknown field %q", path+key)
	for f := range t.Fields() {
		if n := jsonName(f); n != "-" && strings.EqualFold(n, key) {
			msg += fmt.Sprintf(" (field names are case-sensitive: %q)", path+n)
		}
	}
	return &httpError{http.StatusBadRequest, msg}
}

func decodeError(err error) *httpError {
	var (
		mbe *http.MaxBytesError
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", maxBody)}
	case errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF):
		return &httpError{http.StatusBadRequest, "body is not valid JSON"}
	case errors.Is(err, io.EOF):
		return &httpError{http.StatusBadRequest, "body is empty"}
	case errors.As(err, &typ) && typ.Field == "":
		// encoding/json names no field for a number past float64's range.
		return &httpError{http.StatusBadRequest, fmt.Sprintf("a %s is out of range: it must be %s", typ.Value, kindName(typ.Type))}
	case errors.As(err, &typ):
		return &httpError{http.StatusBadRequest, fmt.Sprintf("field %q must be %s (was a %s)", typ.Field, kindName(typ.Type), typ.Value)}
	default:
		return &httpError{http.StatusBadRequest, "body is not valid JSON"}
	}
}

// kindName says in words what a JSON field must hold.
func kindName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Float32, reflect.Float64:
		return "a number"
	default:
		return "a JSON " + t.Kind().String()
	}
}
