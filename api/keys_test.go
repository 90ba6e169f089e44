package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// strictlyAccepted is the careful path's verdict on data decoded into t:
// checkKeys and the single-value rule.
func strictlyAccepted(data []byte, t reflect.Type) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	if checkKeys(dec, t, "") != nil {
		return false
	}
	_, err := dec.Token()
	return errors.Is(err, io.EOF)
}

// FuzzCleanKeys holds the one-pass key scan to the careful path: whatever
// it passes, checkKeys must pass too, or a misspelled or repeated field
// would slip through the fast path of decode.
func FuzzCleanKeys(f *testing.F) {
	for _, s := range []string{
		`{"success":950,"failure":50}`, `{"success":1,"success":2}`, `{"SUCCESS":1}`, `{"succ\u0065ss":1}`,
		`{"success":1,"latency_counts":[1,2,3,4,5,6,7,8,9,10,11,12,13,14]}`, `{"would_shed":{"Major":1,"Major":2}}`,
		`{"would_shed":{"a":1,"b":{"c":1,"c":2}}}`, `{"level":"Major","mode":"pin","ttl":"15m","reason":"a\"b"}`,
		`{"reason":"}","level":"x"}`, `{"value": 1.5e3, "ttl": "1m"}`, `null`, `[{"a":1,"a":1}]`, ` {"success" : 1 } `,
		`{"success":1} {"success":2}`, `{"mode":"pin","Mode":"floor"}`,
	} {
		f.Add(s)
	}
	types := []reflect.Type{reflect.TypeFor[*outcomesBody](), reflect.TypeFor[*overrideBody](), reflect.TypeFor[*signalBody]()}
	f.Fuzz(func(t *testing.T, body string) {
		data := []byte(body)
		for _, typ := range types {
			v := reflect.New(typ.Elem()).Interface()
			if json.Unmarshal(data, v) != nil || !cleanKeys(data, typ) {
				continue
			}
			if !strictlyAccepted(data, typ) {
				t.Fatalf("%v: cleanKeys passed %q, which checkKeys refuses", typ, body)
			}
		}
	})
}

// The fast path must say no to what checkKeys refuses, and yes to the
// bodies clients send, or it saves nothing.
func TestCleanKeys(t *testing.T) {
	typ := reflect.TypeFor[*outcomesBody]()
	for _, tt := range []struct {
		body string
		want bool
	}{
		{`{"success":950,"failure":50}`, true},
		{` { "success" : 1 , "latency_counts" : [ 1 , 2 ] , "would_shed" : { "Major" : 3 } } `, true},
		{`{"success":1,"success":2}`, false},
		{`{"Success":1}`, false},
		{`{"would_shed":{"Major":1,"Major":2}}`, false},
		{`{"succ\u0065ss":1}`, false}, // escapes go to checkKeys, which decodes them
		{`{"would_shed":{` + strings.Repeat(`"a":1,`, maxCleanKeys) + `"b":1}}`, false},
	} {
		if got := cleanKeys([]byte(tt.body), typ); got != tt.want {
			t.Errorf("cleanKeys(%s) = %v, want %v", tt.body, got, tt.want)
		}
	}
}
