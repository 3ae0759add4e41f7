// Package jsonvalue encodes the generic values JSON decodes into
// (map[string]any, []any, string, float64, bool, nil, and the int64 and
// []byte that Kubernetes' libraries put among them) exactly as
// encoding/json's Marshal does, byte for byte, without reflection.
//
// The Kubernetes API shows every object as such a value and encodes it on
// every answer and watch event; encoding/json reaches each map key and
// scalar through reflect and sorts keys through a copy of each. Values of
// any other type are handed to encoding/json, so the output is always
// json.Marshal's. It does no I/O and keeps no state: safe for concurrent
// use.
package jsonvalue

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Marshal is json.Marshal(v) for the values this package knows, faster.
// The result is allocated at its size: v is encoded into a kept buffer
// first.
func Marshal(v any) ([]byte, error) {
	var buf []byte
	select {
	case buf = <-buffers:
	default:
		buf = make([]byte, 0, 4096)
	}
	buf, err := Append(buf[:0], v)
	var out []byte
	if err == nil {
		out = append([]byte(nil), buf...)
	}
	if cap(buf) <= 64<<10 {
		select {
		case buffers <- buf:
		default:
		}
	}
	return out, err
}

// buffers holds the buffers Marshal encodes into.
var buffers = make(chan []byte, 16)

// Append appends json.Marshal(v) to dst. On error dst is returned as far
// as it was written, with the error json.Marshal gives.
func Append(dst []byte, v any) ([]byte, error) { return appendValue(dst, v, 0) }

// maxDepth is how deep appendValue nests before it hands the rest to
// encoding/json, which finds a value that contains itself (an error)
// where recursing on would overflow the stack.
const maxDepth = 1000

func appendValue(dst []byte, v any, depth int) ([]byte, error) {
	if depth > maxDepth {
		return marshal(dst, v)
	}
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return AppendString(dst, v), nil
	case bool:
		if v {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return marshal(dst, v)
		}
		return AppendFloat(dst, v), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case int:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case map[string]any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		return appendMap(dst, v, depth)
	case []any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendValue(dst, e, depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	}
	return marshal(dst, v)
}

func marshal(dst []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// keysPool holds the slices map keys are sorted in.
var keysPool = make(chan []string, 64)

func appendMap(dst []byte, m map[string]any, depth int) ([]byte, error) {
	var keys []string
	select {
	case keys = <-keysPool:
	default:
	}
	keys = keys[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	var err error
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, k)
		dst = append(dst, ':')
		if dst, err = appendValue(dst, m[k], depth+1); err != nil {
			break
		}
	}
	if cap(keys) <= 1024 {
		clear(keys)
		select {
		case keysPool <- keys:
		default:
		}
	}
	if err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}

// AppendFloat appends f as encoding/json formats it (ES6 number to
// string); f is finite.
func AppendFloat(dst []byte, f float64) []byte {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 && !(f == 0 && math.Signbit(f)) {
		// A whole number formats as the integer it is (bar -0).
		return strconv.AppendInt(dst, int64(f), 10)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9, as encoding/json cleans it.
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

const hex = "0123456789abcdef"

// safe[b] reports an ASCII byte encoding/json writes as itself with HTML
// escaping on (its default).
var safe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		switch b {
		case '"', '\\', '<', '>', '&':
		default:
			t[b] = true
		}
	}
	return t
}()

// AppendString appends s quoted as encoding/json does with HTML escaping:
// <, > and & as \u003c and so on, U+2028 and U+2029 escaped, invalid
// UTF-8 as \ufffd.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if safe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
