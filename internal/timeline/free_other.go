//go:build !linux

package timeline

import "errors"

// freeSpace is not known on this platform: only ENOSPC stops recording.
func freeSpace(string) (int64, error) { return 0, errors.New("free space not known on this platform") }
