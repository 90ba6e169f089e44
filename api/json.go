package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
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
// maxBody bytes, no unknown fields, exactly one value.
func decode(w http.ResponseWriter, r *http.Request, v any) *httpError {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return &httpError{http.StatusUnsupportedMediaType, "Content-Type must be application/json"}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if mbe := new(http.MaxBytesError); errors.As(err, &mbe) {
			return decodeError(err)
		}
		return &httpError{http.StatusBadRequest, "body must hold a single JSON object"}
	}
	return nil
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
	case errors.As(err, &typ):
		return &httpError{http.StatusBadRequest, fmt.Sprintf("field %q must be %s", typ.Field, kindName(typ.Type))}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return &httpError{http.StatusBadRequest, "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")}
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
	default:
		return "a JSON " + t.Kind().String()
	}
}
