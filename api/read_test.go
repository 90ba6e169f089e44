package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestQueryLimit(t *testing.T) {
	for _, tt := range []struct {
		name, query string
		want        int
		ok          bool
	}{
		{"absent", "", 100, true},
		{"lowest", "limit=1", 1, true},
		{"highest", "limit=1000", 1000, true},
		{"zero", "limit=0", 0, false},
		{"above", "limit=1001", 0, false},
		{"not an integer", "limit=ten", 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest("GET", "/v1/history?"+tt.query, nil)
			got, ok := queryLimit(w, r, 100, 1000)
			if got != tt.want || ok != tt.ok {
				t.Errorf("?%s: %d, %v; want %d, %v", tt.query, got, ok, tt.want, tt.ok)
			}
			if ok {
				return
			}
			if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "limit must be an integer 1..1000") {
				t.Errorf("?%s answered %d %s, want 400 naming the range", tt.query, w.Code, w.Body)
			}
		})
	}
}
