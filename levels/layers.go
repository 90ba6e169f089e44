package levels

// Layer is one override layer over the automatic level: the index of the
// level it names, and whether it pins (else it is a floor).
type Layer struct {
	Index int
	Pin   bool
}

// Layered returns the published level that the layers give over the
// automatic level auto, bottom first (auto -> fleet -> local, DESIGN.md
// "Overrides in layers"): a pin replaces the level below it, a floor
// publishes the higher of the two. A nil layer is not in force. by says
// which set the published level: 0 for auto, i+1 for layers[i].
func Layered(auto int, layers ...*Layer) (index, by int) {
	index = auto
	for i, l := range layers {
		if l != nil && (l.Pin || l.Index >= index) {
			index, by = l.Index, i+1
		}
	}
	return index, by
}
