package config

import "testing"

func TestClosest(t *testing.T) {
	keys := []string{"listen", "health_check_interval", "hysteresis", "max_override_ttl"}
	tests := []struct {
		name   string
		want   string
		wantOK bool
	}{
		{"helth_check_interval", "health_check_interval", true},
		{"health_check_intreval", "health_check_interval", true},
		{"LISTEN", "listen", true},
		{"lsten", "listen", true},
		{"hysterisis", "hysteresis", true},
		{"max_ttl", "", false},
		{"x", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := closest(tt.name, keys)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("closest(%q) = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
