package levels

import "testing"

func TestLayered(t *testing.T) {
	pin := func(i int) *Layer { return &Layer{Index: i, Pin: true} }
	floor := func(i int) *Layer { return &Layer{Index: i} }
	for _, tc := range []struct {
		name         string
		auto         int
		fleet, local *Layer
		index, by    int
	}{
		{"no override", 2, nil, nil, 2, 0},
		{"a pin replaces, even lower", 3, pin(1), nil, 1, 1},
		{"a floor below auto leaves auto", 3, floor(1), nil, 3, 0},
		{"a floor above auto", 1, floor(3), nil, 3, 1},
		{"a floor at auto sets it", 2, nil, floor(2), 2, 2},
		{"local over fleet", 4, pin(3), pin(1), 1, 2},
		{"local floor over a fleet pin", 0, pin(2), floor(1), 2, 1},
		{"local floor above a fleet pin", 0, pin(2), floor(4), 4, 2},
	} {
		index, by := Layered(tc.auto, tc.fleet, tc.local)
		if index != tc.index || by != tc.by {
			t.Errorf("%s: Layered(%d, %v, %v) = %d by %d, want %d by %d", tc.name, tc.auto, tc.fleet, tc.local, index, by, tc.index, tc.by)
		}
	}
}
