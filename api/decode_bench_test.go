package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http/httptest"
	"reflect"
	"testing"
)

// BenchmarkDecode is what an outcome report pays to have its body read
// strictly: decode (one decoding and one key scan), beside the careful
// path it falls back to (json.Decoder tokens for the keys, then decoding).
func BenchmarkDecode(b *testing.B) {
	body := []byte(`{"success":100,"failure":2,"latency_counts":[1,2,3,4,5,6,7,8,9,10,11,12,13,14]}`)
	b.Run("decode", func(b *testing.B) {
		r := httptest.NewRequest("POST", "/v1/outcomes", nil)
		r.Header.Set("Content-Type", "application/json")
		r.ContentLength = int64(len(body))
		w := httptest.NewRecorder()
		b.ReportAllocs()
		for b.Loop() {
			r.Body = io.NopCloser(bytes.NewReader(body))
			var v outcomesBody
			if err := decode(w, r, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("careful", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v outcomesBody
			if !strictlyAccepted(body, reflect.TypeOf(&v)) || json.Unmarshal(body, &v) != nil {
				b.Fatal("refused")
			}
		}
	})
}
