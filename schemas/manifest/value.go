package manifest

import (
	"encoding/json"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/jetplane/jetplane/internal/jsonvalue"
	"github.com/jetplane/jetplane/schemas"
)

// DecodeValue is Decode of one JSON object that the caller has already
// parsed into the values encoding/json gives (map[string]any, []any,
// string, float64, bool, nil): the same objects and the same errors as
// Decode(source, json.Marshal(v)), without encoding v and parsing it
// again. A server that reads a request body as JSON, and edits it, hands
// the result here.
//
// Where the text json.Marshal would write is not what the JSON path of
// Decode takes whole (a number beyond 2^53, a character YAML refuses,
// nesting beyond the limit, a size beyond MaxObjectBytes, a value of
// another type), v is encoded and decoded as text, so the errors are
// Decode's. v is read, never changed, and not kept.
func DecodeValue(source string, v map[string]any) ([]*schemas.Object, error) {
	if n, ok := plainSize(v, 0); !ok || n > MaxObjectBytes {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, &Error{Source: source, Doc: 1, Reason: err.Error()}
		}
		return Decode(source, b)
	}
	b := newBatch()
	in := &input{b: b, source: source, line: 1, docs: 1}
	in.objects(v, 1, func(e *Error) {
		e.Source, e.Doc = source, 1
		b.fail(e)
	})
	return b.result()
}

// plainSize is the length of json.Marshal(v), and whether fastJSON would
// read that text back to v itself: false when it would not (and the YAML
// path would decide), or when v holds a value of another type.
func plainSize(v any, depth int) (int, bool) {
	switch v := v.(type) {
	case nil:
		return 4, true
	case bool:
		if v {
			return 4, true
		}
		return 5, true
	case string:
		return plainString(v)
	case float64:
		// fastJSON reads every number as float64 and refuses those beyond
		// 2^53; -0 would come back as 0.
		if math.IsInf(v, 0) || math.IsNaN(v) || math.Abs(v) > maxSafeInteger || v == 0 && math.Signbit(v) {
			return 0, false
		}
		var buf [32]byte
		return len(jsonvalue.AppendFloat(buf[:0], v)), true
	case map[string]any:
		if v == nil || depth >= maxDepth {
			return 0, false
		}
		n := 2 + max(len(v)-1, 0)
		for k, e := range v {
			kn, ok := plainString(k)
			if !ok {
				return 0, false
			}
			en, ok := plainSize(e, depth+1)
			if !ok {
				return 0, false
			}
			n += kn + 1 + en
		}
		return n, true
	case []any:
		if v == nil || depth >= maxDepth {
			return 0, false
		}
		n := 2 + max(len(v)-1, 0)
		for _, e := range v {
			en, ok := plainSize(e, depth+1)
			if !ok {
				return 0, false
			}
			n += en
		}
		return n, true
	}
	return 0, false
}

// plainString is the length of s as json.Marshal quotes it, and whether
// that text passes fastJSON's checks unchanged: valid UTF-8 (json.Marshal
// would replace the rest), and only characters YAML allows once escaped
// (json.Marshal escapes controls, but writes DEL and C1 controls as
// they are), and no text surrogateEscape would take for an escape.
func plainString(s string) (int, bool) {
	if surrogateText(s) {
		return 0, false
	}
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == 0x7f:
				return 0, false
			case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return 0, false
		case r == '\u2028' || r == '\u2029':
			n += 6
		case r == 0x85, r >= 0xA0 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000:
			n += size
		default:
			return 0, false
		}
		i += size
	}
	return n, true
}

// surrogateText reports whether s holds a backslash, u and a surrogate's
// first two hex digits: json.Marshal writes the backslash as \\, and
// surrogateEscape, reading the encoded text, sends it to the YAML path.
func surrogateText(s string) bool {
	for {
		i := strings.Index(s, `\u`)
		if i < 0 || i+3 >= len(s) {
			return false
		}
		if (s[i+2] == 'd' || s[i+2] == 'D') && strings.IndexByte("89abcdefABCDEF", s[i+3]) >= 0 {
			return true
		}
		s = s[i+2:]
	}
}
