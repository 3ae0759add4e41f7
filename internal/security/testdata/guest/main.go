// Command guest is the hostile WebAssembly module of the sandbox tests
// (built with GOOS=wasip1 GOARCH=wasm). Its first argument picks what it
// tries; "escape" ends 0 only when every attempt to leave its volumes was
// refused, and prints ESCAPED for each one that was not.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// The raw WASI calls, so that paths reach the host exactly as written
// (Go's os package cleans them first).

//go:wasmimport wasi_snapshot_preview1 path_open
func pathOpen(fd int32, dirflags uint32, path unsafe.Pointer, pathLen uint32, oflags uint32, rightsBase uint64, rightsInheriting uint64, fdflags uint32, newFd unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 path_symlink
func pathSymlink(old unsafe.Pointer, oldLen uint32, fd int32, newPath unsafe.Pointer, newLen uint32) uint32

//go:wasmimport wasi_snapshot_preview1 path_link
func pathLink(oldFd int32, oldFlags uint32, old unsafe.Pointer, oldLen uint32, newFd int32, newPath unsafe.Pointer, newLen uint32) uint32

//go:wasmimport wasi_snapshot_preview1 path_rename
func pathRename(fd int32, old unsafe.Pointer, oldLen uint32, newFd int32, newPath unsafe.Pointer, newLen uint32) uint32

func ptr(s string) (unsafe.Pointer, uint32) {
	b := []byte(s)
	return unsafe.Pointer(&b[0]), uint32(len(b))
}

func rawOpen(dirfd int32, path string, write bool) (int32, uint32) {
	p, n := ptr(path)
	var fd int32
	rights := uint64(1<<1 | 1<<14) // fd_read, path_open
	oflags := uint32(0)
	if write {
		rights |= 1 << 6 // fd_write
		oflags = 1       // O_CREAT
	}
	errno := pathOpen(dirfd, 1 /* follow symlinks */, p, n, oflags, rights, rights, 0, unsafe.Pointer(&fd))
	return fd, errno
}

var escaped []string

func mustFail(what string, err error) {
	if err == nil {
		escaped = append(escaped, what)
		fmt.Println("ESCAPED:", what)
		return
	}
	fmt.Println("refused:", what+":", err)
}

func errnoErr(e uint32) error {
	if e == 0 {
		return nil
	}
	return syscall.Errno(e)
}

// readLeak reads path; anything read is a leak.
func readLeak(what, path string) {
	b, err := os.ReadFile(path)
	if err == nil {
		fmt.Printf("ESCAPED: %s: read %d bytes\n", what, len(b))
		escaped = append(escaped, what)
		return
	}
	fmt.Println("refused:", what+":", err)
}

func dirfd(path string) int32 {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		fmt.Println("open", path, err)
		os.Exit(3)
	}
	return int32(fd)
}

func escape() {
	keys := os.Getenv("KEYS")       // the data directory's auth/encryption.keys, as the host names it
	outside := os.Getenv("OUTSIDE") // a host path that must not come to exist
	if err := os.WriteFile("/data/f", []byte("mine"), 0o644); err != nil {
		fmt.Println("write /data/f:", err)
		os.Exit(3)
	}
	data, host := dirfd("/data"), dirfd("/host")

	// A relative symlink climbing to /, and an absolute one.
	mustFail("relative symlink", os.Symlink("../../../../../../../../../../../../", "/data/up"))
	readLeak("read through a relative symlink", "/data/up"+keys)
	_, err := os.ReadDir("/data/up/root")
	mustFail("list /root through a relative symlink", err)
	mustFail("write through a relative symlink", os.WriteFile("/data/up"+outside, []byte("x"), 0o644))
	mustFail("absolute symlink", os.Symlink("/", "/data/abs"))
	readLeak("read through an absolute symlink", "/data/abs"+keys)
	mustFail("write through an absolute symlink", os.WriteFile("/data/abs"+outside, []byte("x"), 0o644))
	for _, target := range []string{"/", "../../../../../../../..", keys} {
		p, n := ptr(target)
		q, m := ptr("raw-link")
		mustFail("raw symlink to "+target, errnoErr(pathSymlink(p, n, data, q, m)))
		_ = os.Remove("/data/raw-link")
	}

	// Symlinks the host put in a mounted directory lead nowhere outside it.
	readLeak("read through the host's link to /", "/host/root-link"+keys)
	readLeak("read through the host's link to the keys", "/host/keys-link")
	_, err = os.ReadDir("/host/root-link/root")
	mustFail("list /root through the host's link", err)
	_, e := rawOpen(host, "root-link"+outside, true)
	mustFail("create through the host's link", errnoErr(e))

	// .. in raw paths.
	for _, p := range []string{"..", "../../../../../../../.." + keys, "sub/../../f", "./../data/f"} {
		_, e := rawOpen(data, p, false)
		mustFail("open "+p, errnoErr(e))
	}
	_, e = rawOpen(data, "../../../../../../../.."+outside, true)
	mustFail("create ../"+outside, errnoErr(e))

	// Hard links: to a file of the mount, across mounts, and to what a
	// host link points at.
	mustFail("hard link in a mount", os.Link("/data/f", "/data/hard"))
	mustFail("hard link across mounts", os.Link("/data/f", "/scratch/hard"))
	{
		p, n := ptr("keys-link")
		q, m := ptr("hard-keys")
		mustFail("hard link following the host's link", errnoErr(pathLink(host, 1, p, n, host, q, m)))
		readLeak("read the hard link", "/host/hard-keys")
	}

	// Renames across mounts and out of one.
	mustFail("rename across mounts", os.Rename("/data/f", "/scratch/f"))
	mustFail("rename into a read-only mount", os.Rename("/data/f", "/ro/f"))
	{
		p, n := ptr("f")
		q, m := ptr("../../../../../../../.." + outside)
		mustFail("raw rename out of the mount", errnoErr(pathRename(data, p, n, data, q, m)))
		if err := os.WriteFile("/host/mine", []byte("mine"), 0o644); err != nil {
			fmt.Println("write /host/mine:", err)
			os.Exit(3)
		}
		p, n = ptr("mine")
		q, m = ptr("root-link" + outside)
		mustFail("rename through the host's link", errnoErr(pathRename(host, p, n, host, q, m)))
	}

	// A read-only mount refuses every write.
	mustFail("create in a read-only mount", os.WriteFile("/ro/new", []byte("x"), 0o644))
	f, err := os.OpenFile("/ro/file.txt", os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString("overwritten")
		f.Close()
	}
	mustFail("write a read-only file", err)
	mustFail("truncate a read-only file", os.Truncate("/ro/file.txt", 0))
	mustFail("remove from a read-only mount", os.Remove("/ro/file.txt"))
	mustFail("mkdir in a read-only mount", os.Mkdir("/ro/dir", 0o755))
	// (WASI preview 1 has no chmod: Go's os.Chmod only stats.)
	mustFail("rename in a read-only mount", os.Rename("/ro/file.txt", "/ro/moved"))
	mustFail("symlink in a read-only mount", os.Symlink("file.txt", "/ro/link"))
	mustFail("chtimes in a read-only mount", os.Chtimes("/ro/file.txt", time.Unix(1, 0), time.Unix(1, 0)))
	if b, err := os.ReadFile("/ro/file.txt"); err != nil || string(b) != "read me" {
		fmt.Printf("the read-only file reads %q, %v\n", b, err)
		os.Exit(3)
	}

	// What stays inside works: listing a volume, and a host's link that
	// points within its mount.
	if entries, err := os.ReadDir("/data"); err != nil || len(entries) == 0 {
		fmt.Println("list /data:", len(entries), err)
		os.Exit(3)
	}
	if b, err := os.ReadFile("/host/inner-link"); err != nil || string(b) != "inside" {
		fmt.Printf("read /host/inner-link: %q %v\n", b, err)
		os.Exit(3)
	}

	if len(escaped) > 0 {
		fmt.Println("escapes:", len(escaped))
		os.Exit(1)
	}
	fmt.Println("every escape refused")
}

func main() {
	mode := ""
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	arg := func(i int) int {
		n, _ := strconv.Atoi(os.Args[i])
		return n
	}
	switch mode {
	case "escape":
		escape()
	case "hog": // allocate N MiB, then exit 0
		var sink [][]byte
		for range arg(2) {
			b := make([]byte, 1<<20)
			b[0] = 1
			sink = append(sink, b)
		}
		fmt.Println("allocated", len(sink), "MiB")
	case "fill": // write N MiB into /data, then report how far it got
		f, err := os.Create("/data/fill")
		if err != nil {
			fmt.Println("create:", err)
			os.Exit(3)
		}
		chunk := make([]byte, 64<<10)
		written := 0
		for written < arg(2)<<20 {
			n, err := f.Write(chunk)
			written += n
			if err != nil {
				fmt.Println("fill stopped at", written, "bytes:", err)
				break
			}
		}
		f.Close()
		// Many small files count too.
		for i := range 10000 {
			if err := os.WriteFile("/data/small-"+strconv.Itoa(i), []byte("x"), 0o644); err != nil {
				fmt.Println("small files stopped at", i, ":", err)
				break
			}
		}
		fmt.Println("filled", written)
	case "spew": // write N MiB to stdout
		line := strings.Repeat("x", 1023) + "\n"
		for range arg(2) << 10 {
			os.Stdout.WriteString(line)
		}
	case "touch": // write a marker into /data
		if err := os.WriteFile("/data/marker", []byte(os.Args[2]), 0o644); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("touched")
	case "env-digest": // print the digest of an env value, never the value
		sum := sha256.Sum256([]byte(os.Getenv(os.Args[2])))
		fmt.Println("digest", hex.EncodeToString(sum[:]))
	default:
		fmt.Println("unknown mode", mode)
		os.Exit(2)
	}
}
