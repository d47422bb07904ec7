package cluster

import (
	"errors"
	"fmt"
	"strconv"
	"syscall"
)

// mountTmpfs mounts a tmpfs of size bytes on dir. errNotPermitted says the
// process may not mount (no CAP_SYS_ADMIN, a user namespace without it).
func mountTmpfs(dir string, size int64) error {
	err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size="+strconv.FormatInt(size, 10)+",mode=0700")
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		return fmt.Errorf("%w: mount tmpfs on %s: %v", errNotPermitted, dir, err)
	}
	if err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

// unmount detaches the file system on dir at once, as umount -l does, even
// while a process still has files open in it.
func unmount(dir string) error {
	if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}
