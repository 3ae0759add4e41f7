package events

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/jetplane/jetplane/schemas"
)

const (
	// InputPrefix is where writers publish; the stream maps it to StoredPrefix.
	InputPrefix = "jp.in"
	// StoredPrefix is the prefix of every stored event subject.
	StoredPrefix = "jp.ev"
	// emptyToken stands for an empty field (a cluster-scoped namespace).
	emptyToken = "_"
)

// EscapeToken maps any string to a NATS subject token, reversibly: letters,
// digits and '-' stay, every other byte becomes ~XX (upper-case hex), and the
// empty string becomes "_". Names may contain '.', which would otherwise split
// the token.
func EscapeToken(s string) string {
	if s == "" {
		return emptyToken
	}
	clean := true
	for i := 0; i < len(s); i++ {
		if !plain(s[i]) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('~')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
	return b.String()
}

const hex = "0123456789ABCDEF"

func plain(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

// ErrBadSubject is returned for a subject or token that EscapeToken could not
// have produced.
var ErrBadSubject = errors.New("not a jetplane event subject")

// UnescapeToken reverses EscapeToken.
func UnescapeToken(t string) (string, error) {
	if t == emptyToken {
		return "", nil
	}
	if t == "" {
		return "", fmt.Errorf("%w: empty token", ErrBadSubject)
	}
	if !strings.Contains(t, "~") {
		for i := 0; i < len(t); i++ {
			if !plain(t[i]) {
				return "", fmt.Errorf("%w: byte %q in token %q", ErrBadSubject, t[i], t)
			}
		}
		return t, nil
	}
	out := make([]byte, 0, len(t))
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case plain(c):
			out = append(out, c)
		case c == '~' && i+2 < len(t):
			v, err := strconv.ParseUint(t[i+1:i+3], 16, 8)
			if err != nil || strings.ToUpper(t[i+1:i+3]) != t[i+1:i+3] || plain(byte(v)) {
				// Only the canonical form is accepted, so that every key
				// has exactly one subject.
				return "", fmt.Errorf("%w: bad escape %q in token %q", ErrBadSubject, t[i:i+3], t)
			}
			out = append(out, byte(v))
			i += 2
		default:
			return "", fmt.Errorf("%w: byte %q in token %q", ErrBadSubject, c, t)
		}
	}
	return string(out), nil
}

func keyTokens(k *schemas.ObjectKey) string {
	return EscapeToken(k.GetKind()) + "." + EscapeToken(k.GetNamespace()) + "." + EscapeToken(k.GetName())
}

// InputSubject is the subject a writer publishes an event of key k on.
func InputSubject(k *schemas.ObjectKey) string { return InputPrefix + "." + keyTokens(k) }

// Partition is the partition the stream's subject transform assigns to key
// k among p partitions: FNV-1a (32 bit) of the three escaped tokens
// concatenated, modulo p, exactly as the server's partition() computes it.
// Writers use it to name the stored subject of a concurrency check without a
// wildcard, which the server resolves with a direct index lookup.
func Partition(k *schemas.ObjectKey, p int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(EscapeToken(k.GetKind())))
	_, _ = h.Write([]byte(EscapeToken(k.GetNamespace())))
	_, _ = h.Write([]byte(EscapeToken(k.GetName())))
	return int(h.Sum32() % uint32(p))
}

// StoredSubject is the subject key k's events are stored under, among p
// partitions.
func StoredSubject(k *schemas.ObjectKey, p int) string {
	return StoredPrefix + "." + strconv.Itoa(Partition(k, p)) + "." + keyTokens(k)
}

// KeyFilter is the stored-subject filter matching every event of key k,
// whatever its partition.
func KeyFilter(k *schemas.ObjectKey) string { return StoredPrefix + ".*." + keyTokens(k) }

// PartitionFilter matches every stored event of partition p.
func PartitionFilter(p int) string { return StoredPrefix + "." + strconv.Itoa(p) + ".>" }

// KindPartitionFilter matches the stored subjects of kind's keys in
// partition p.
func KindPartitionFilter(p int, kind string) string {
	return StoredPrefix + "." + strconv.Itoa(p) + "." + EscapeToken(kind) + ".>"
}

// MaxPartitions bounds a log's partitions.
const MaxPartitions = 1024

// PartitionConsumerPrefix names the durable consumers the reconciler
// runtime reads the log with, one per partition: PartitionConsumer(p).
const PartitionConsumerPrefix = "jp-reconcilers"

// PartitionConsumer is the name of the runtime's consumer of partition p
// (prefix "" is PartitionConsumerPrefix): <prefix>_<p>. No credential but
// an instance's may create, change, read or acknowledge on it. These
// consumers acknowledge with ack-all (decision 0108); the underscore,
// which no controller's name (a DNS-1123 label) holds, keeps their names
// apart from the earlier ones (ExplicitAckPartitionConsumer).
func PartitionConsumer(prefix string, p int) string {
	if prefix == "" {
		prefix = PartitionConsumerPrefix
	}
	return prefix + "_" + strconv.Itoa(p)
}

// ExplicitAckPartitionConsumer is the name partition p's consumer had
// before decision 0108, <prefix>-<p>, when it acknowledged each delivery
// on its own; the runtime deletes it when it reads the partition.
func ExplicitAckPartitionConsumer(prefix string, p int) string {
	if prefix == "" {
		prefix = PartitionConsumerPrefix
	}
	return prefix + "-" + strconv.Itoa(p)
}

// ParseSubject splits a stored subject into its partition and key.
func ParseSubject(subject string) (int, *schemas.ObjectKey, error) {
	parts := strings.Split(subject, ".")
	if len(parts) != 6 || parts[0]+"."+parts[1] != StoredPrefix {
		return 0, nil, fmt.Errorf("%w: %q", ErrBadSubject, subject)
	}
	p, err := strconv.Atoi(parts[2])
	if err != nil || p < 0 {
		return 0, nil, fmt.Errorf("%w: partition %q in %q", ErrBadSubject, parts[2], subject)
	}
	var k schemas.ObjectKey
	for i, dst := range []*string{&k.Kind, &k.Namespace, &k.Name} {
		if *dst, err = UnescapeToken(parts[3+i]); err != nil {
			return 0, nil, err
		}
	}
	return p, &k, nil
}
