package jsonvalue

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Unmarshal is json.Unmarshal(data, &v) for v a map[string]any or an
// []any (*T): the same value, or the same error. The JSON API clients
// send (objects of strings, numbers, lists and maps) is read without
// reflection; anything this reader does not take as it is — a syntax
// error, a surrogate escape, invalid UTF-8, a number out of range, a
// document that is not a T — is left to encoding/json, which gives the
// value or the error.
func Unmarshal[T map[string]any | []any](data []byte, v *T) error {
	if *v != nil {
		// encoding/json fills the map v holds (others may share it).
		return json.Unmarshal(data, v)
	}
	d := decoder{data: data, maxDepth: maxNesting}
	d.space()
	var x any
	var ok bool
	switch {
	case d.peek('{'):
		x, ok = d.object(0)
	case d.peek('['):
		x, ok = d.array(0)
	}
	if ok {
		d.space()
		if t, isT := x.(T); isT && d.i == len(d.data) {
			*v = t
			return nil
		}
	}
	return json.Unmarshal(data, v)
}

// maxNesting is below encoding/json's own limit (10,000): deeper
// documents are left to it.
const maxNesting = 1000

// Options make Parse read JSON as a caller's other path reads it.
type Options struct {
	// MaxDepth refuses objects and lists nested this deep (0: 1,000).
	MaxDepth int
	// UniqueKeys refuses an object that repeats a key (encoding/json
	// keeps the last).
	UniqueKeys bool
	// Number turns a number's text into its value, or refuses it (nil:
	// a float64, as encoding/json gives).
	Number func(text string) (any, bool)
}

// Parse reads one JSON value at the start of data, after white space, into
// the generic values encoding/json gives (map[string]any, []any, string,
// float64 or Options.Number's values, bool, nil), in one pass and without
// reflection. It returns the value and where it ended; ok is false for
// what it does not take as plain JSON: a syntax error, a surrogate escape,
// invalid UTF-8, and what opts refuse. White space after the value is not
// read.
func Parse(data []byte, opts Options) (v any, end int, ok bool) {
	d := decoder{data: data, maxDepth: opts.MaxDepth, uniqueKeys: opts.UniqueKeys, num: opts.Number}
	if d.maxDepth <= 0 {
		d.maxDepth = maxNesting
	}
	d.space()
	v, ok = d.value(0)
	return v, d.i, ok
}

type decoder struct {
	data       []byte
	i          int
	maxDepth   int
	uniqueKeys bool
	num        func(string) (any, bool)
}

func (d *decoder) peek(c byte) bool { return d.i < len(d.data) && d.data[d.i] == c }

func (d *decoder) space() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (any, bool) {
	if d.i >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.i]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		s, ok := d.string()
		return s, ok
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	}
	return nil, false
}

func (d *decoder) literal(s string) bool {
	if len(d.data)-d.i < len(s) || string(d.data[d.i:d.i+len(s)]) != s {
		return false
	}
	d.i += len(s)
	return true
}

func (d *decoder) object(depth int) (any, bool) {
	if depth >= d.maxDepth {
		return nil, false
	}
	d.i++ // {
	m := make(map[string]any)
	d.space()
	if d.peek('}') {
		d.i++
		return m, true
	}
	for {
		d.space()
		if !d.peek('"') {
			return nil, false
		}
		k, ok := d.string()
		if !ok {
			return nil, false
		}
		d.space()
		if !d.peek(':') {
			return nil, false
		}
		d.i++
		d.space()
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		if d.uniqueKeys {
			if _, dup := m[k]; dup {
				return nil, false
			}
		}
		m[k] = v // the last of a repeated key, as encoding/json
		d.space()
		if d.peek(',') {
			d.i++
			continue
		}
		if d.peek('}') {
			d.i++
			return m, true
		}
		return nil, false
	}
}

func (d *decoder) array(depth int) (any, bool) {
	if depth >= d.maxDepth {
		return nil, false
	}
	d.i++ // [
	l := []any{}
	d.space()
	if d.peek(']') {
		d.i++
		return l, true
	}
	for {
		d.space()
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		l = append(l, v)
		d.space()
		if d.peek(',') {
			d.i++
			continue
		}
		if d.peek(']') {
			d.i++
			return l, true
		}
		return nil, false
	}
}

// string reads a string at d.i (its opening quote). Strings with a
// surrogate escape or invalid UTF-8, which encoding/json replaces in its
// own ways, are not taken.
func (d *decoder) string() (string, bool) {
	d.i++ // "
	start := d.i
	for d.i < len(d.data) {
		c := d.data[d.i]
		switch {
		case c == '"':
			s := d.data[start:d.i]
			d.i++
			if !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		case c == '\\':
			return d.escaped(start)
		case c < 0x20:
			return "", false
		}
		d.i++
	}
	return "", false
}

// escaped reads the rest of a string from its first escape on.
func (d *decoder) escaped(start int) (string, bool) {
	b := make([]byte, 0, d.i-start+16)
	b = append(b, d.data[start:d.i]...)
	for d.i < len(d.data) {
		c := d.data[d.i]
		switch {
		case c == '"':
			d.i++
			if !utf8.Valid(b) {
				return "", false
			}
			return string(b), true
		case c < 0x20:
			return "", false
		case c != '\\':
			b = append(b, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.data) {
			return "", false
		}
		e := d.data[d.i+1]
		d.i += 2
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			if d.i+4 > len(d.data) {
				return "", false
			}
			r, err := strconv.ParseUint(string(d.data[d.i:d.i+4]), 16, 32)
			if err != nil || r >= 0xD800 && r < 0xE000 {
				return "", false
			}
			d.i += 4
			b = utf8.AppendRune(b, rune(r))
		default:
			return "", false
		}
	}
	return "", false
}

// number reads a number as JSON's grammar has it, as a float64.
func (d *decoder) number() (any, bool) {
	start := d.i
	if d.peek('-') {
		d.i++
	}
	switch {
	case d.peek('0'):
		d.i++
	case d.digits() == 0:
		return nil, false
	}
	if d.peek('.') {
		d.i++
		if d.digits() == 0 {
			return nil, false
		}
	}
	if d.peek('e') || d.peek('E') {
		d.i++
		if d.peek('+') || d.peek('-') {
			d.i++
		}
		if d.digits() == 0 {
			return nil, false
		}
	}
	if d.num != nil {
		return d.num(string(d.data[start:d.i]))
	}
	f, err := strconv.ParseFloat(string(d.data[start:d.i]), 64)
	if err != nil {
		return nil, false
	}
	return f, true
}

func (d *decoder) digits() int {
	n := 0
	for d.i < len(d.data) && d.data[d.i] >= '0' && d.data[d.i] <= '9' {
		d.i++
		n++
	}
	return n
}
