package manifest

import (
	"strconv"
	"strings"
)

// MaxErrors caps how many problems one Decode or DecodePath call reports. A
// result holding exactly MaxErrors entries may have stopped early; the input is
// then too broken for a longer list to help.
const MaxErrors = 50

// Error is one problem with one document. It carries the location as data so
// that the HTTP API can return it as structured JSON and the CLI can print it.
type Error struct {
	// Source names the input: a file path, "-" for stdin, "request body".
	Source string
	// Doc is the 1-based document number within Source: the position in a
	// YAML stream (empty documents count) or in a JSON array. 0 when the
	// problem concerns the whole input.
	Doc int
	// Field is the path to the offending field, such as
	// `metadata.labels["app.kubernetes.io/name"]` or `items[2].metadata.name`;
	// empty when the problem is not about one field (a syntax error, a size
	// limit).
	Field string
	// Reason says what is wrong and, when the fix is known, what to do.
	Reason string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Doc > 0 {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString("document ")
		b.WriteString(strconv.Itoa(e.Doc))
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// Errors is every problem found in one call, in input order. Decode returns
// either objects or Errors, never both, so nothing half-valid reaches the log.
type Errors []*Error

// Error puts one problem on each line, the way the CLI prints them.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find the individual *Error values.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// fieldPath builds the dotted paths used in Error.Field. Keys that are not
// plain identifiers are quoted in brackets, because Kubernetes-style keys such
// as "app.kubernetes.io/name" would otherwise read as several path steps.
// Long keys are shortened like values, so a hostile key cannot make every
// error about its subtree as large as the document.
func fieldPath(parent, key string) string {
	if plainKey(key) && len(key) <= 80 {
		if parent == "" {
			return key
		}
		return parent + "." + key
	}
	return parent + "[" + quoteValue(key) + "]"
}

func indexPath(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

func plainKey(key string) bool {
	if key == "" {
		return false
	}
	for i, c := range key {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && (c == '-' || '0' <= c && c <= '9'):
		default:
			return false
		}
	}
	return true
}
