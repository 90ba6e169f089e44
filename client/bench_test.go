package client

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func BenchmarkAllow(b *testing.B) {
	c := at(b, majorState(time.Now()))
	b.ReportAllocs()
	n := 0
	for i := 0; b.Loop(); i++ {
		if c.Allow(i & 127) {
			n++
		}
	}
	_ = n
}

func BenchmarkAllowParallel(b *testing.B) {
	c := at(b, majorState(time.Now()))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			c.Allow(i & 127)
			i++
		}
	})
}

func BenchmarkFeature(b *testing.B) {
	c := at(b, majorState(time.Now()))
	b.ReportAllocs()
	for b.Loop() {
		c.Feature("checkout")
	}
}

func BenchmarkRecord(b *testing.B) {
	c := at(b, majorState(time.Now()))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ok := true
		for pb.Next() {
			c.Record(ok)
			ok = !ok
		}
	})
}

func benchHandler(b *testing.B, h http.Handler) {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Priority", "80")
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, r)
	}
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })

func BenchmarkHandlerBare(b *testing.B) { benchHandler(b, okHandler) }

func BenchmarkHandlerMiddleware(b *testing.B) {
	c := at(b, majorState(time.Now()))
	benchHandler(b, Middleware(c, PriorityFromHeader("X-Priority", 50))(okHandler))
}
