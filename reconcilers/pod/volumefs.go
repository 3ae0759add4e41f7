package pod

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
)

// volumeFS is what a module sees of one volume: a directory it cannot
// leave. Every path is resolved beneath the mount's root by an os.Root
// (on Linux the kernel's RESOLVE_BENEATH semantics: no "..", absolute
// path or symlink leads out, whoever made the link); the module cannot
// make symlinks or hard links at all; a read-only mount refuses every
// write; and what a writable volume holds is charged to its quota.
// Renames across mounts never reach it (wazero refuses them: the two
// paths belong to different file systems). Decision 0034.
type volumeFS struct {
	experimentalsys.UnimplementedFS
	root     *os.Root
	readOnly bool
	quota    *quota // nil: not counted (hostPath volumes)
}

var _ experimentalsys.FS = (*volumeFS)(nil)

// entryBytes is what a file or directory costs a quota besides its bytes,
// so that a module cannot fill the disk's inodes with empty files.
const entryBytes = 4096

func newVolumeFS(dir string, readOnly bool, q *quota) (*volumeFS, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &volumeFS{root: root, readOnly: readOnly, quota: q}, nil
}

// Close releases the root.
func (v *volumeFS) Close() error { return v.root.Close() }

// errnoOf maps an error of os.Root to WASI's: a path that would leave the
// root is EPERM, like wazero's own refusal of "..".
func errnoOf(err error) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return experimentalsys.UnwrapOSError(errno)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return experimentalsys.ENOENT
	case errors.Is(err, fs.ErrExist):
		return experimentalsys.EEXIST
	case errors.Is(err, fs.ErrPermission):
		return experimentalsys.EPERM
	}
	return experimentalsys.EPERM // "path escapes from parent" and the like
}

// rel is a guest path as the root names it: wazero hands paths already
// cleaned and relative, perhaps with a trailing slash.
func rel(path string) (string, bool) {
	dir := strings.HasSuffix(path, "/")
	path = strings.TrimRight(path, "/")
	if path == "" {
		path = "."
	}
	return path, dir
}

const writeFlags = experimentalsys.O_WRONLY | experimentalsys.O_RDWR | experimentalsys.O_CREAT | experimentalsys.O_TRUNC | experimentalsys.O_APPEND

// OpenFile implements experimentalsys.FS.
func (v *volumeFS) OpenFile(path string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	if v.readOnly && flag&writeFlags != 0 {
		return nil, experimentalsys.EROFS
	}
	path, wantDir := rel(path)
	osFlag := 0
	switch {
	case flag&experimentalsys.O_RDWR != 0:
		osFlag = os.O_RDWR
	case flag&experimentalsys.O_WRONLY != 0:
		osFlag = os.O_WRONLY
	}
	for _, f := range []struct {
		wasi experimentalsys.Oflag
		os   int
	}{
		{experimentalsys.O_APPEND, os.O_APPEND}, {experimentalsys.O_CREAT, os.O_CREATE}, {experimentalsys.O_EXCL, os.O_EXCL},
		{experimentalsys.O_TRUNC, os.O_TRUNC}, {experimentalsys.O_SYNC, os.O_SYNC}, {experimentalsys.O_DSYNC, syscall.O_DSYNC},
		{experimentalsys.O_DIRECTORY, syscall.O_DIRECTORY}, {experimentalsys.O_NOFOLLOW, syscall.O_NOFOLLOW},
	} {
		if flag&f.wasi != 0 {
			osFlag |= f.os
		}
	}
	if wantDir {
		osFlag |= syscall.O_DIRECTORY
	}
	created := false
	if osFlag&os.O_CREATE != 0 && v.quota != nil {
		if _, err := v.root.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			if !v.quota.charge(entryBytes) {
				return nil, experimentalsys.EIO
			}
			created = true
		}
	}
	var truncated int64
	if osFlag&os.O_TRUNC != 0 && v.quota != nil {
		if fi, err := v.root.Stat(path); err == nil && fi.Mode().IsRegular() {
			truncated = fi.Size()
		}
	}
	f, err := v.root.OpenFile(path, osFlag, perm&fs.ModePerm)
	if err != nil {
		if created {
			v.quota.refund(entryBytes)
		}
		return nil, errnoOf(err)
	}
	if truncated > 0 {
		v.quota.refund(truncated)
	}
	vf := &volumeFile{f: f, fs: v, name: path, append: flag&experimentalsys.O_APPEND != 0}
	if v.quota != nil {
		if st, errno := vf.Stat(); errno == 0 {
			vf.ino = st.Ino
			v.quota.opened(st.Ino)
		}
	}
	return vf, 0
}

// Lstat implements experimentalsys.FS.
func (v *volumeFS) Lstat(path string) (sys.Stat_t, experimentalsys.Errno) {
	path, _ = rel(path)
	fi, err := v.root.Lstat(path)
	if err != nil {
		return sys.Stat_t{}, errnoOf(err)
	}
	return sys.NewStat_t(fi), 0
}

// Stat implements experimentalsys.FS.
func (v *volumeFS) Stat(path string) (sys.Stat_t, experimentalsys.Errno) {
	path, _ = rel(path)
	fi, err := v.root.Stat(path)
	if err != nil {
		return sys.Stat_t{}, errnoOf(err)
	}
	return sys.NewStat_t(fi), 0
}

// Mkdir implements experimentalsys.FS.
func (v *volumeFS) Mkdir(path string, perm fs.FileMode) experimentalsys.Errno {
	if v.readOnly {
		return experimentalsys.EROFS
	}
	path, _ = rel(path)
	if v.quota != nil && !v.quota.charge(entryBytes) {
		return experimentalsys.EIO
	}
	if err := v.root.Mkdir(path, perm&fs.ModePerm); err != nil {
		if v.quota != nil {
			v.quota.refund(entryBytes)
		}
		return errnoOf(err)
	}
	return 0
}

// Chmod implements experimentalsys.FS.
func (v *volumeFS) Chmod(path string, perm fs.FileMode) experimentalsys.Errno {
	if v.readOnly {
		return experimentalsys.EROFS
	}
	path, _ = rel(path)
	return errnoOf(v.root.Chmod(path, perm&fs.ModePerm))
}

// Rename implements experimentalsys.FS: within this volume only (wazero
// hands a rename between two mounts to neither).
func (v *volumeFS) Rename(from, to string) experimentalsys.Errno {
	if v.readOnly {
		return experimentalsys.EROFS
	}
	from, _ = rel(from)
	to, _ = rel(to)
	var replaced fs.FileInfo
	if v.quota != nil {
		replaced, _ = v.root.Lstat(to)
	}
	if err := v.root.Rename(from, to); err != nil {
		return errnoOf(err)
	}
	if replaced != nil {
		v.released(replaced)
	}
	return 0
}

// released refunds what a removed entry cost; a file the module still
// has open keeps its bytes on disk, so they stay charged until its last
// close (volumeFile.Close).
func (v *volumeFS) released(fi fs.FileInfo) {
	if v.quota == nil {
		return
	}
	st := sys.NewStat_t(fi)
	if st.Nlink > 1 || v.quota.unlinkedOpen(st.Ino) {
		return
	}
	n := int64(entryBytes)
	if fi.Mode().IsRegular() {
		n += fi.Size()
	}
	v.quota.refund(n)
}

// Rmdir implements experimentalsys.FS.
func (v *volumeFS) Rmdir(path string) experimentalsys.Errno {
	if v.readOnly {
		return experimentalsys.EROFS
	}
	path, _ = rel(path)
	fi, err := v.root.Lstat(path)
	if err != nil {
		return errnoOf(err)
	}
	if !fi.IsDir() {
		return experimentalsys.ENOTDIR
	}
	if err := v.root.Remove(path); err != nil {
		return errnoOf(err)
	}
	v.released(fi)
	return 0
}

// Unlink implements experimentalsys.FS.
func (v *volumeFS) Unlink(path string) experimentalsys.Errno {
	if v.readOnly {
		return experimentalsys.EROFS
	}
	path, _ = rel(path)
	fi, err := v.root.Lstat(path)
	if err != nil {
		return errnoOf(err)
	}
	if fi.IsDir() {
		return experimentalsys.EISDIR
	}
	if err := v.root.Remove(path); err != nil {
		return errnoOf(err)
	}
	v.released(fi)
	return 0
}

// Link implements experimentalsys.FS: refused. A hard link made through
// a host's symlink would give the module a name for a file outside.
func (v *volumeFS) Link(string, string) experimentalsys.Errno {
	if v.readOnly {
		return experimentalsys.EROFS
	}
	return experimentalsys.EPERM
}

// Symlink implements experimentalsys.FS: refused. Links the host made
// resolve beneath the root; the module makes none, so nothing it leaves
// behind can mislead the host either.
func (v *volumeFS) Symlink(string, string) experimentalsys.Errno {
	if v.readOnly {
		return experimentalsys.EROFS
	}
	return experimentalsys.EPERM
}

// Readlink implements experimentalsys.FS.
func (v *volumeFS) Readlink(path string) (string, experimentalsys.Errno) {
	path, _ = rel(path)
	s, err := v.root.Readlink(path)
	return s, errnoOf(err)
}

// Utimens implements experimentalsys.FS.
func (v *volumeFS) Utimens(path string, atim, mtim int64) experimentalsys.Errno {
	if v.readOnly {
		return experimentalsys.EROFS
	}
	path, _ = rel(path)
	return errnoOf(v.root.Chtimes(path, utime(atim), utime(mtim)))
}

// utime is a WASI timestamp as Chtimes takes it: the zero time leaves it.
func utime(ns int64) time.Time {
	if ns == experimentalsys.UTIME_OMIT {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// volumeFile is a file opened through a volumeFS.
type volumeFile struct {
	experimentalsys.UnimplementedFile
	f      *os.File
	fs     *volumeFS
	name   string // beneath the root
	append bool
	ino    sys.Inode
}

func (vf *volumeFile) Dev() (uint64, experimentalsys.Errno) {
	st, errno := vf.Stat()
	return st.Dev, errno
}

func (vf *volumeFile) Ino() (sys.Inode, experimentalsys.Errno) {
	st, errno := vf.Stat()
	return st.Ino, errno
}

func (vf *volumeFile) IsDir() (bool, experimentalsys.Errno) {
	st, errno := vf.Stat()
	return st.Mode.IsDir(), errno
}

func (vf *volumeFile) IsAppend() bool { return vf.append }

func (vf *volumeFile) Stat() (sys.Stat_t, experimentalsys.Errno) {
	fi, err := vf.f.Stat()
	if err != nil {
		return sys.Stat_t{}, errnoOf(err)
	}
	return sys.NewStat_t(fi), 0
}

func (vf *volumeFile) Read(buf []byte) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := vf.f.Read(buf)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, errnoOf(err)
}

func (vf *volumeFile) Pread(buf []byte, off int64) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := vf.f.ReadAt(buf, off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, errnoOf(err)
}

// fileOffset is int64 by another name, so that vet does not take Seek,
// which returns WASI's errno as wazero's File wants, for a malformed
// io.Seeker.
type fileOffset = int64

func (vf *volumeFile) Seek(offset fileOffset, whence int) (int64, experimentalsys.Errno) {
	n, err := vf.f.Seek(offset, whence)
	return n, errnoOf(err)
}

func (vf *volumeFile) Readdir(n int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	entries, err := vf.f.ReadDir(n)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, errnoOf(err)
	}
	out := make([]experimentalsys.Dirent, 0, len(entries))
	for _, e := range entries {
		d := experimentalsys.Dirent{Name: e.Name(), Type: e.Type()}
		if fi, err := e.Info(); err == nil {
			d.Ino = sys.NewStat_t(fi).Ino
		}
		out = append(out, d)
	}
	return out, 0
}

// grow charges the quota for a write of n bytes at off (-1: at the
// current offset, or the end in append mode).
func (vf *volumeFile) grow(off int64, n int) experimentalsys.Errno {
	q := vf.fs.quota
	if q == nil || n == 0 {
		return 0
	}
	fi, err := vf.f.Stat()
	if err != nil {
		return errnoOf(err)
	}
	if off < 0 {
		if vf.append {
			off = fi.Size()
		} else if off, err = vf.f.Seek(0, io.SeekCurrent); err != nil {
			return errnoOf(err)
		}
	}
	if end := off + int64(n); end > fi.Size() && !q.charge(end-fi.Size()) {
		return experimentalsys.EIO
	}
	return 0
}

func (vf *volumeFile) Write(buf []byte) (int, experimentalsys.Errno) {
	if vf.fs.readOnly {
		return 0, experimentalsys.EBADF
	}
	if errno := vf.grow(-1, len(buf)); errno != 0 {
		return 0, errno
	}
	n, err := vf.f.Write(buf)
	return n, errnoOf(err)
}

func (vf *volumeFile) Pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	if vf.fs.readOnly {
		return 0, experimentalsys.EBADF
	}
	if errno := vf.grow(off, len(buf)); errno != 0 {
		return 0, errno
	}
	n, err := vf.f.WriteAt(buf, off)
	return n, errnoOf(err)
}

func (vf *volumeFile) Truncate(size int64) experimentalsys.Errno {
	if vf.fs.readOnly {
		return experimentalsys.EBADF
	}
	if q := vf.fs.quota; q != nil {
		fi, err := vf.f.Stat()
		if err != nil {
			return errnoOf(err)
		}
		switch {
		case size > fi.Size() && !q.charge(size-fi.Size()):
			return experimentalsys.EIO
		case size < fi.Size():
			defer q.refund(fi.Size() - size)
		}
	}
	return errnoOf(vf.f.Truncate(size))
}

func (vf *volumeFile) Sync() experimentalsys.Errno { return errnoOf(vf.f.Sync()) }

func (vf *volumeFile) Datasync() experimentalsys.Errno { return errnoOf(vf.f.Sync()) }

func (vf *volumeFile) Utimens(atim, mtim int64) experimentalsys.Errno {
	if vf.fs.readOnly {
		return experimentalsys.EBADF
	}
	// By name, resolved beneath the root again.
	return errnoOf(vf.fs.root.Chtimes(vf.name, utime(atim), utime(mtim)))
}

func (vf *volumeFile) Close() experimentalsys.Errno {
	if q := vf.fs.quota; q != nil && vf.ino != 0 {
		fi, err := vf.f.Stat()
		if q.closed(vf.ino) && err == nil {
			// The last handle of a file removed while open: its bytes
			// leave the disk now.
			q.refund(entryBytes + fi.Size())
		}
	}
	return errnoOf(vf.f.Close())
}

// quota bounds the bytes (and entries, entryBytes each) a pod's writable
// volumes hold: one per volume, each charging its pod's as well. Safe for
// concurrent use.
type quota struct {
	mu       sync.Mutex
	used     int64
	limit    int64
	parent   *quota
	open     map[sys.Inode]int  // files the module has open, by inode
	unlinked map[sys.Inode]bool // of those, the ones removed since
}

func newQuota(limit, used int64, parent *quota) *quota {
	return &quota{limit: limit, used: used, parent: parent, open: map[sys.Inode]int{}, unlinked: map[sys.Inode]bool{}}
}

// charge takes n bytes, or nothing when they would pass a limit.
func (q *quota) charge(n int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.used+n > q.limit {
		return false
	}
	if q.parent != nil && !q.parent.charge(n) {
		return false
	}
	q.used += n
	return true
}

func (q *quota) refund(n int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.used = max(q.used-n, 0)
	if q.parent != nil {
		q.parent.refund(n)
	}
}

func (q *quota) opened(ino sys.Inode) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.open[ino]++
}

// closed notes a handle of ino closed; it tells whether that was the
// last one of a file removed while open.
func (q *quota) closed(ino sys.Inode) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.open[ino]--; q.open[ino] > 0 {
		return false
	}
	delete(q.open, ino)
	gone := q.unlinked[ino]
	delete(q.unlinked, ino)
	return gone
}

// unlinkedOpen notes ino removed, and tells whether it is still open (its
// refund then waits for the last close).
func (q *quota) unlinkedOpen(ino sys.Inode) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.open[ino] > 0 {
		q.unlinked[ino] = true
		return true
	}
	return false
}

// usage is what dir already holds, as a quota counts it.
func usage(dir string) int64 {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0
	}
	defer root.Close()
	var n int64
	_ = fs.WalkDir(root.FS(), ".", func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		n += entryBytes
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n - entryBytes // the volume's own directory is free
}
