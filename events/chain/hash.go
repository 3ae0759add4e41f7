package chain

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
)

// Head is a chain hash: h_n after the event of sequence n.
type Head [sha256.Size]byte

// String is the head in lower-case hex, as checkpoints and the API show it.
func (h Head) String() string { return hex.EncodeToString(h[:]) }

// IsZero reports h_0, the head before any event.
func (h Head) IsZero() bool { return h == Head{} }

// MarshalText writes the head in hex.
func (h Head) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText reads a head in hex.
func (h *Head) UnmarshalText(b []byte) error {
	v, err := ParseHead(string(b))
	*h = v
	return err
}

// ParseHead reads a head written by String.
func ParseHead(s string) (Head, error) {
	var h Head
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("chain head %q: want %d hex digits", s, 2*len(h))
	}
	copy(h[:], b)
	return h, nil
}

// Event is one stored event as the chain sees it. The slices may point
// into a reader's buffer: valid only during the callback that receives it.
type Event struct {
	Seq     uint64
	Time    int64 // stored time, Unix nanoseconds
	Subject []byte
	Header  []byte
	Data    []byte
}

// Hasher extends a chain. Its zero value is not usable; use NewHasher. A
// Hasher is not safe for concurrent use.
type Hasher struct {
	h   hash.Hash
	buf [20]byte
	sum []byte
}

// NewHasher returns a Hasher.
func NewHasher() *Hasher { return &Hasher{h: sha256.New(), sum: make([]byte, 0, sha256.Size)} }

// Next returns h_n from prev = h_{n-1} and the event of sequence n.
func (x *Hasher) Next(prev Head, e Event) Head {
	x.h.Reset()
	x.h.Write(prev[:])
	binary.BigEndian.PutUint64(x.buf[0:], e.Seq)
	binary.BigEndian.PutUint64(x.buf[8:], uint64(e.Time))
	binary.BigEndian.PutUint32(x.buf[16:], uint32(len(e.Subject)))
	x.h.Write(x.buf[:20])
	x.h.Write(e.Subject)
	binary.BigEndian.PutUint32(x.buf[0:], uint32(len(e.Header)))
	x.h.Write(x.buf[:4])
	x.h.Write(e.Header)
	binary.BigEndian.PutUint32(x.buf[0:], uint32(len(e.Data)))
	x.h.Write(x.buf[:4])
	x.h.Write(e.Data)
	var out Head
	copy(out[:], x.h.Sum(x.sum[:0]))
	return out
}

// Next is Hasher.Next with a fresh hasher, for one-off use.
func Next(prev Head, e Event) Head { return NewHasher().Next(prev, e) }
