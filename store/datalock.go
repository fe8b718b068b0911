package store

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// DataDir is the directory of the SQLite store at path (the default when
// empty), with symbolic links resolved.
func DataDir(path string) string {
	path = cmp.Or(path, defaultPath)
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return filepath.Dir(path)
}

// CheckPath refuses a SQLite store path that cannot be a database file.
func CheckPath(path string) error {
	path = cmp.Or(path, defaultPath)
	if strings.HasPrefix(path, "~") {
		return fmt.Errorf("store.path %q: ~ is not expanded; give an absolute path, or one relative to the working directory", path)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("store.path %s is a directory: name the database file, such as %s", path, filepath.Join(path, "docstream.db"))
	} else if err == nil && !st.Mode().IsRegular() {
		return fmt.Errorf("store.path %s is not a regular file: name the database file", path)
	}
	return nil
}

// WritableDir creates dir if needed and checks that a file can be made in it.
func WritableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// LockDataDir takes the data directory of a SQLite store for this process
// until the returned file is closed: a second gateway would take the first
// one's live runs for a crash's leftovers.
func LockDataDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the data directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, "docstream.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another docstream process"
			if pid := strings.TrimSpace(string(b)); pid != "" {
				holder = "docstream process " + pid
			}
			return nil, fmt.Errorf("the data directory %s is in use by %s: one gateway per store (set store.path to another directory)", dir, holder)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
