package daemon

import (
	"os"
	"path/filepath"
)

// minStateReserve is the least free space the timeline leaves on the
// data_dir's disk: a save of state.json writes a whole new copy beside the
// old one (and its .prev link) before the rename.
const minStateReserve = 1 << 20

// stateReserve is the free space the timeline recorder must leave on the
// data_dir's disk so that state.json can always be saved: room for two
// more copies of it as it is now (a history of 1,000 entries with long
// reasons reaches a few MB), and never less than 1 MiB.
func stateReserve(dataDir string) func() int64 {
	path := filepath.Join(dataDir, "state.json")
	return func() int64 {
		var size int64
		if info, err := os.Stat(path); err == nil {
			size = info.Size()
		}
		return max(minStateReserve, 2*size)
	}
}
