package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/degraded/degraded/client"
)

// With no daemon the client fails open: the shop serves everything, and
// failing requests are answered 500.
func TestShopServesWithoutADaemon(t *testing.T) {
	c, err := client.New("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	s := newShop(c)
	h := s.routes()
	get := func(method, path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
		return w
	}
	w := get("GET", "/recommendations")
	var body map[string][]string
	if err := json.Unmarshal(w.Body.Bytes(), &body); w.Code != 200 || err != nil || len(body["recommendations"]) != 2 {
		t.Fatalf("recommendations: %d %s, want the personalised pair", w.Code, w.Body)
	}
	if w := get("POST", "/admin/fail?rate=1"); w.Code != 200 {
		t.Fatalf("admin/fail: %d", w.Code)
	}
	if w := get("GET", "/products"); w.Code != http.StatusInternalServerError {
		t.Errorf("products while failing: %d, want 500", w.Code)
	}
	if w := get("POST", "/admin/fail?rate=2"); w.Code != 400 {
		t.Errorf("rate=2: %d, want 400", w.Code)
	}
}
