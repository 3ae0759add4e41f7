package manifest

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jetplane/jetplane/internal/jsonvalue"
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
	// Read as encoding/json's decoder with UseNumber reads it (numbers
	// then through jsonNumber), refusing what the YAML path would not
	// take unchanged: a repeated key, nesting past maxDepth. Nothing may
	// follow the object (trimmed holds no trailing white space).
	v, end, ok := jsonvalue.Parse(trimmed, jsonvalue.Options{MaxDepth: maxDepth, UniqueKeys: true, Number: yamlNumber})
	if !ok || end != len(trimmed) {
		return nil, errNotFastJSON
	}
	return v, nil
}

// yamlNumber is a number's value as the YAML path gives it, or refused.
func yamlNumber(s string) (any, bool) {
	v, err := jsonNumber(s)
	return v, err == nil
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
