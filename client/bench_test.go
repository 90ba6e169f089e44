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

// partialState is Major (threshold 50) admitting 40% of the band 30-49.
func partialState() State {
	st := majorState(time.Now().Add(time.Minute))
	st.Partial = &Partial{From: 30, Fraction: 0.4}
	return st
}

// BenchmarkAllowBand: Allow at Major with a partial band, over priorities
// 0..127 (23 of 128 in the band, so about one call in six draws), and
// each path alone.
func BenchmarkAllowBand(b *testing.B) {
	c := at(b, partialState())
	for _, bc := range []struct {
		name string
		prio func(i int) int
	}{
		{"mixed", func(i int) int { return i & 127 }},
		{"above", func(int) int { return 80 }},
		{"band", func(int) int { return 40 }},
		{"below", func(int) int { return 10 }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for i := 0; b.Loop(); i++ {
				if c.Allow(bc.prio(i)) {
					n++
				}
			}
			_ = n
		})
	}
}

// mix is a service's priorities: eight classes, two of them in the band
// of partialState.
var mix = [8]int{0, 10, 20, 35, 45, 50, 70, 90}

// BenchmarkAdmit is Allow plus counting the decision for the admission
// report, over mix: what Allow would cost if it counted.
func BenchmarkAdmit(b *testing.B) {
	c := at(b, partialState())
	b.Run("allow", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for i := 0; b.Loop(); i++ {
			if c.Allow(mix[i&7]) {
				n++
			}
		}
		_ = n
	})
	b.Run("admit", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for i := 0; b.Loop(); i++ {
			if c.Admit(mix[i&7]).Admitted() {
				n++
			}
		}
		_ = n
	})
}

func BenchmarkAdmitParallel(b *testing.B) {
	c := at(b, partialState())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			c.Admit(mix[i&7])
			i++
		}
	})
}

func BenchmarkHandlerMiddlewarePropagation(b *testing.B) {
	c := at(b, majorState(time.Now()))
	benchHandler(b, Middleware(c, PriorityFromHeader("X-Priority", 50), WithPropagation())(okHandler))
}
