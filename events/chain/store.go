package chain

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/minio/highwayhash"
)

// The stream's block files are NATS's file store format: records of
//
//	length(4, little endian; high bit: has a header) seq(8) time(8)
//	subject length(2) subject [header length(4) header] data checksum(8)
//
// where the checksum is HighwayHash-64 keyed by SHA-256("<stream>-<block
// index>") over seq, time, subject, header and data. The high bits of seq
// mark erased records and tombstones, which are not events.
const (
	recHeader   = 22
	recChecksum = 8
	hdrBit      = 1 << 31
	erasedBit   = 1 << 63
	tombBit     = 1 << 62
	maxRecord   = 32 << 20
)

// ErrNoStream means the store holds no files of the stream (yet).
var ErrNoStream = errors.New("the store holds no files of the stream")

// Store is one stream's block files in a NATS server's store directory,
// read without a server. It only reads.
type Store struct {
	// Dir is the stream's msgs directory.
	Dir    string
	Stream string
}

// Open finds stream's files under a NATS store directory (the embedded
// server's data directory): <dir>/jetstream/<account>/streams/<stream>/msgs.
func Open(storeDir, stream string) (*Store, error) {
	dirs, _ := filepath.Glob(filepath.Join(storeDir, "jetstream", "*", "streams", stream, "msgs"))
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%s in %s: %w", stream, storeDir, ErrNoStream)
	}
	if len(dirs) > 1 {
		return nil, fmt.Errorf("%s in %s: found in %d accounts (%s); give the account's directory", stream, storeDir, len(dirs), strings.Join(dirs, ", "))
	}
	return &Store{Dir: dirs[0], Stream: stream}, nil
}

// Block is one block file.
type Block struct {
	Index uint32
	Path  string
}

// Name is the block's file name, as reports show it.
func (b Block) Name() string { return filepath.Base(b.Path) }

// Blocks lists the stream's block files in index order.
func (s *Store) Blocks() ([]Block, error) {
	ents, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, err
	}
	var out []Block
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".blk")
		if !ok || e.IsDir() {
			continue
		}
		i, err := strconv.ParseUint(name, 10, 32)
		if err != nil {
			continue
		}
		out = append(out, Block{Index: uint32(i), Path: filepath.Join(s.Dir, e.Name())})
	}
	slices.SortFunc(out, func(a, b Block) int { return int(int64(a.Index) - int64(b.Index)) })
	return out, nil
}

// BadRecord says where a block stops being readable as records.
type BadRecord struct {
	File   string
	Offset int64
	Reason string
	// Torn is a record that runs past the end of the file: the end of a
	// write in progress, or a file cut short.
	Torn bool
}

func (b *BadRecord) Error() string {
	return fmt.Sprintf("%s at offset %d: %s", b.File, b.Offset, b.Reason)
}

// checksummer is a block's record checksum.
func (s *Store) checksummer(index uint32) hash.Hash64 {
	key := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", s.Stream, index)))
	h, err := highwayhash.New64(key[:])
	if err != nil {
		panic(err) // the key is always 32 bytes
	}
	return h
}

// Records parses buf, the bytes of block b from offset base on, calling fn
// for each event in it. It returns how many bytes of buf were whole
// records, and a *BadRecord when parsing stopped before the end of buf.
func (s *Store) Records(b Block, buf []byte, base int64, fn func(e Event, off int64) error) (int, *BadRecord, error) {
	hh := s.checksummer(b.Index)
	var sum [8]byte
	le := binary.LittleEndian
	i := 0
	for i < len(buf) {
		bad := func(torn bool, format string, a ...any) (int, *BadRecord, error) {
			return i, &BadRecord{File: b.Path, Offset: base + int64(i), Reason: fmt.Sprintf(format, a...), Torn: torn}, nil
		}
		if len(buf)-i < recHeader {
			return bad(true, "a record header cut short (%d of %d bytes)", len(buf)-i, recHeader)
		}
		h := buf[i : i+recHeader]
		rl := le.Uint32(h[0:])
		hasHdr := rl&hdrBit != 0
		rl &^= hdrBit
		slen := int(le.Uint16(h[20:]))
		if rl < recHeader+recChecksum || rl > maxRecord {
			return bad(false, "not a record (length %d)", rl)
		}
		if int(rl) > len(buf)-i {
			return bad(true, "a record of %d bytes cut short (%d bytes left)", rl, len(buf)-i)
		}
		body := buf[i+recHeader : i+int(rl)-recChecksum]
		if slen > len(body) {
			return bad(false, "not a record (subject of %d bytes in %d)", slen, len(body))
		}
		subj, rest := body[:slen], body[slen:]
		var hdr []byte
		if hasHdr {
			if len(rest) < 4 {
				return bad(false, "not a record (no header length)")
			}
			hl := int(le.Uint32(rest))
			if hl > len(rest)-4 {
				return bad(false, "not a record (header of %d bytes in %d)", hl, len(rest)-4)
			}
			hdr, rest = rest[4:4+hl], rest[4+hl:]
		}
		hh.Reset()
		hh.Write(h[4:20])
		hh.Write(subj)
		if hasHdr {
			hh.Write(body[slen+4:])
		} else {
			hh.Write(rest)
		}
		if string(hh.Sum(sum[:0])) != string(buf[i+int(rl)-recChecksum:i+int(rl)]) {
			return bad(false, "checksum mismatch (the record's bytes changed)")
		}
		seq := le.Uint64(h[4:])
		if seq&(erasedBit|tombBit) == 0 && seq != 0 {
			e := Event{Seq: seq, Time: int64(le.Uint64(h[12:])), Subject: subj, Header: hdr, Data: rest}
			if err := fn(e, base+int64(i)); err != nil {
				return i, nil, err
			}
		}
		i += int(rl)
	}
	return i, nil, nil
}

// readFrom reads block b from off to its end into buf (reused when it is
// large enough).
func readFrom(b Block, off int64, buf []byte) ([]byte, error) {
	f, err := os.Open(b.Path)
	if err != nil {
		return buf, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return buf, err
	}
	n := fi.Size() - off
	if n <= 0 {
		return buf[:0], nil
	}
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	m, err := f.ReadAt(buf, off)
	if err == io.EOF {
		err = nil
	}
	return buf[:m], err
}
