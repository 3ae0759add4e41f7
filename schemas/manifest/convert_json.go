package manifest

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// errNotFastJSON sends a document back to the YAML path.
var errNotFastJSON = errors.New("not plain JSON")

// fastJSON converts a document that is a plain JSON object straight into
// the values the YAML converter produces (map[string]any, []any, string,
// float64, bool, nil), about ten times faster than parsing it as YAML: API
// clients and the CLI send JSON. It accepts only what the YAML path would
// accept unchanged; anything else — a syntax error, a duplicate key, deep
// nesting, a number that does not fit a float64 exactly, trailing data — is
// errNotFastJSON, and the caller parses the document as YAML, whose errors
// name the line and the problem. So the two paths give the same objects and
// the same errors.
func fastJSON(raw []byte) (any, error) {
	// A raw tab can only be whitespace in JSON (strings escape it), but
	// YAML refuses tabs where it expects indentation: leave those documents
	// to the YAML path and its precise error.
	trimmed := bytes.Trim(raw, " \r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' || bytes.IndexByte(raw, '\t') >= 0 || surrogateEscape(trimmed) || !yamlPrintable(trimmed) {
		return nil, errNotFastJSON
	}
	p := jsonParser{b: trimmed}
	v, ok := p.value(0)
	// Nothing may follow the object (trimmed holds no trailing
	// whitespace).
	if !ok || p.i != len(trimmed) {
		return nil, errNotFastJSON
	}
	return v, nil
}

// jsonParser reads one JSON value into the values encoding/json's
// decoder gives with UseNumber (json.Number then through jsonNumber), in
// one pass over the bytes: walking a json.Decoder token by token cost more
// than the rest of a small apply's decoding. Any input it does not take
// as plain JSON (a syntax error, a duplicate key, nesting deeper than
// maxDepth) it refuses, and the document takes the YAML path. Callers
// have refused tabs, surrogate escapes and what YAML cannot print
// (invalid UTF-8 among it) before.
type jsonParser struct {
	b []byte
	i int
}

func (p *jsonParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\n', '\r', '\t':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (any, bool) {
	p.space()
	if p.i >= len(p.b) {
		return nil, false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		if depth >= maxDepth {
			return nil, false
		}
		p.i++
		m := map[string]any{}
		p.space()
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			return m, true
		}
		for {
			p.space()
			k, ok := p.str()
			if !ok {
				return nil, false
			}
			if _, dup := m[k]; dup {
				return nil, false
			}
			p.space()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return nil, false
			}
			p.i++
			v, ok := p.value(depth + 1)
			if !ok {
				return nil, false
			}
			m[k] = v
			p.space()
			if p.i >= len(p.b) {
				return nil, false
			}
			switch p.b[p.i] {
			case ',':
				p.i++
			case '}':
				p.i++
				return m, true
			default:
				return nil, false
			}
		}
	case c == '[':
		if depth >= maxDepth {
			return nil, false
		}
		p.i++
		list := []any{}
		p.space()
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return list, true
		}
		for {
			v, ok := p.value(depth + 1)
			if !ok {
				return nil, false
			}
			list = append(list, v)
			p.space()
			if p.i >= len(p.b) {
				return nil, false
			}
			switch p.b[p.i] {
			case ',':
				p.i++
			case ']':
				p.i++
				return list, true
			default:
				return nil, false
			}
		}
	case c == '"':
		return p.str()
	case c == '-' || '0' <= c && c <= '9':
		n, ok := p.number()
		if !ok {
			return nil, false
		}
		v, err := jsonNumber(n)
		return v, err == nil
	}
	for _, lit := range [...]struct {
		text string
		v    any
	}{{"true", true}, {"false", false}, {"null", nil}} {
		if bytes.HasPrefix(p.b[p.i:], []byte(lit.text)) {
			p.i += len(lit.text)
			return lit.v, true
		}
	}
	return nil, false
}

// str reads a string at p.i.
func (p *jsonParser) str() (string, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", false
	}
	p.i++
	start := p.i
	// Most strings have no escape: take them as they are.
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := string(p.b[start:p.i])
			p.i++
			return s, true
		case c == '\\':
			return p.escaped(start)
		case c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

// escaped reads the rest of a string that began at start and holds an
// escape at p.i.
func (p *jsonParser) escaped(start int) (string, bool) {
	out := append([]byte(nil), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			return "", false
		}
		e := p.b[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if p.i+4 > len(p.b) {
				return "", false
			}
			r, err := strconv.ParseUint(string(p.b[p.i:p.i+4]), 16, 32)
			if err != nil || utf16.IsSurrogate(rune(r)) {
				return "", false
			}
			p.i += 4
			out = utf8.AppendRune(out, rune(r))
		default:
			return "", false
		}
	}
	return "", false
}

// number reads a number at p.i, as JSON's grammar has it, and returns its
// text.
func (p *jsonParser) number() (string, bool) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case digits() == 0:
		return "", false
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return "", false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return "", false
		}
	}
	return string(p.b[start:p.i]), true
}

func jsonNumber(s string) (any, error) {
	if !strings.ContainsAny(s, ".eE") {
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil || i > maxSafeInteger || i < -maxSafeInteger {
			return nil, errNotFastJSON
		}
		return float64(i), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || math.Abs(f) > maxSafeInteger {
		return nil, errNotFastJSON
	}
	return f, nil
}

// surrogateEscape reports a \uD800-\uDFFF escape: JSON and YAML decoders
// treat UTF-16 surrogates differently, so such documents take the YAML path.
func surrogateEscape(b []byte) bool {
	for i := bytes.Index(b, []byte(`\u`)); i >= 0 && i+3 < len(b); {
		if (b[i+2] == 'd' || b[i+2] == 'D') && strings.ContainsRune("89abcdefABCDEF", rune(b[i+3])) {
			return true
		}
		j := bytes.Index(b[i+2:], []byte(`\u`))
		if j < 0 {
			return false
		}
		i += 2 + j
	}
	return false
}

// yamlPrintable reports whether b is valid UTF-8 of only the characters
// YAML allows in a document; JSON allows more (DEL, C1 controls) and
// replaces invalid UTF-8 silently, where YAML rejects both.
func yamlPrintable(b []byte) bool {
	for len(b) > 0 {
		c := b[0]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f {
				return false
			}
			b = b[1:]
			continue
		}
		r, size := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && size == 1:
			return false
		case r == 0x85, r >= 0xA0 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000:
		default:
			return false
		}
		b = b[size:]
	}
	return true
}
