package timeline

import "golang.org/x/sys/unix"

// freeSpace is the space an unprivileged writer may still use on the
// disk that holds dir.
func freeSpace(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}
