package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

const (
	// maxDepth bounds nesting. Real manifests stay far below it; the limit
	// exists so recursion over hostile input stays shallow.
	maxDepth = 100
	// maxAliasNodes bounds how many nodes alias expansion may produce in one
	// document. The parser keeps an alias as one node, so a few hundred bytes
	// of "billion laughs" only explode here; counting keeps that linear.
	maxAliasNodes = 100_000
	// maxSafeInteger is the largest integer a float64 (what structpb stores)
	// holds exactly.
	maxSafeInteger = 1 << 53
)

// parseYAML parses one document chunk. lineBase is the source line before
// the chunk's first line, so messages point into the user's file rather than
// into the chunk. A nil root means an empty document.
func parseYAML(raw []byte, lineBase int) (root *yaml.Node, e *Error) {
	// The parser is third-party code fed with hostile input; a panic there
	// must become a rejected document, not a crashed gate.
	defer func() {
		if r := recover(); r != nil {
			root, e = nil, &Error{Reason: fmt.Sprintf("invalid YAML: the parser failed: %v", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, &Error{Reason: syntaxReason(err, raw, lineBase)}
	}
	// A chunk is what lies between two "---" lines; a second document in
	// it was started some other way ("--- # comment", "..."), which would
	// silently shift every later document number.
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, &Error{Reason: syntaxReason(err, raw, lineBase)}
	default:
		return nil, &Error{Reason: fmt.Sprintf("invalid YAML: line %d starts a second document; separate documents with a line holding only ---", lineBase+extra.Line)}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root = doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil, nil
	}
	return root, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// syntaxReason rewrites the parser's chunk-relative line into a source line
// and adds the fix for the most common mistake, a tab in the indentation.
func syntaxReason(err error, raw []byte, lineBase int) string {
	msg := err.Error()
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")
	}
	n, _ := strconv.Atoi(m[1])
	reason := fmt.Sprintf("invalid YAML: line %d: %s", lineBase+n, msg[len(m[0]):])
	if tabIndented(raw, n) || tabIndented(raw, n-1) {
		reason += " (a tab is used for indentation; YAML allows only spaces)"
	}
	return reason
}

// tabIndented reports whether 1-based line n of raw has a tab in its leading
// whitespace.
func tabIndented(raw []byte, n int) bool {
	if n < 1 {
		return false
	}
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(raw, '\n')
		if j < 0 {
			return false
		}
		raw = raw[j+1:]
	}
	for _, c := range raw {
		switch c {
		case '\t':
			return true
		case ' ':
		default:
			return false
		}
	}
	return false
}

// converter turns a parsed document into the plain values structpb accepts:
// map[string]any, []any, string, float64, bool and nil. It owns every check
// that needs the YAML node rather than the value: key types, duplicates,
// tags, aliases and depth. One converter serves one document.
type converter struct {
	lineBase   int
	aliasDepth int // > 0 while expanding an alias
	aliasNodes int
	aliasBytes int
}

func (c *converter) line(n *yaml.Node) int { return c.lineBase + n.Line }

func (c *converter) value(n *yaml.Node, path string, depth int) (any, *Error) {
	if c.aliasDepth > 0 {
		c.aliasNodes++
		if c.aliasNodes > maxAliasNodes {
			return nil, tooManyAliases(path)
		}
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, &Error{Field: path, Reason: fmt.Sprintf("alias %s on line %d has no anchor", quoteValue("*"+n.Value), c.line(n))}
		}
		c.aliasDepth++
		v, err := c.value(n.Alias, path, depth)
		c.aliasDepth--
		return v, err
	case yaml.ScalarNode:
		return c.scalar(n, path)
	case yaml.MappingNode:
		if tag := n.ShortTag(); tag != "!!map" {
			return nil, unsupportedTag(path, tag)
		}
		if depth >= maxDepth {
			return nil, tooDeep(path)
		}
		return c.mapping(n, path, depth+1)
	case yaml.SequenceNode:
		if tag := n.ShortTag(); tag != "!!seq" {
			return nil, unsupportedTag(path, tag)
		}
		if depth >= maxDepth {
			return nil, tooDeep(path)
		}
		list := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			v, err := c.value(item, indexPath(path, i), depth+1)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		return list, nil
	default:
		return nil, &Error{Field: path, Reason: fmt.Sprintf("unexpected YAML node on line %d", c.line(n))}
	}
}

func (c *converter) mapping(n *yaml.Node, path string, depth int) (any, *Error) {
	if len(n.Content)%2 != 0 {
		return nil, &Error{Field: path, Reason: fmt.Sprintf("malformed mapping on line %d", c.line(n))}
	}
	m := make(map[string]any, len(n.Content)/2)
	var merges []*yaml.Node
	for i := 0; i < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		key, isMerge, err := c.key(kn, path)
		if err != nil {
			return nil, err
		}
		if isMerge {
			merges = append(merges, vn)
			continue
		}
		field := fieldPath(path, key)
		if _, dup := m[key]; dup {
			return nil, &Error{Field: field, Reason: fmt.Sprintf("duplicate key %s on line %d (first on line %d); each key may appear once", quoteValue(key), c.line(kn), c.line(firstKey(n, key)))}
		}
		v, err := c.value(vn, field, depth)
		if err != nil {
			return nil, err
		}
		m[key] = v
	}
	// Merge keys ("<<: *base") fill in only what the mapping does not set
	// itself, and earlier sources win over later ones, as YAML 1.1 says.
	for _, src := range merges {
		v, err := c.value(src, path, depth-1)
		if err != nil {
			return nil, err
		}
		if err := c.merge(m, v, path, src); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// merge copies src's entries into dst. Each copied entry counts against the
// alias budget: a chain of maps each merging the previous one does quadratic
// copying with only linear alias nodes.
func (c *converter) merge(dst map[string]any, src any, path string, n *yaml.Node) *Error {
	var sources []any
	switch s := src.(type) {
	case map[string]any:
		sources = []any{s}
	case []any:
		sources = s
	}
	if len(sources) == 0 {
		return &Error{Field: path, Reason: fmt.Sprintf("merge key << on line %d needs a mapping or a list of mappings", c.line(n))}
	}
	for _, item := range sources {
		im, ok := item.(map[string]any)
		if !ok {
			return &Error{Field: path, Reason: fmt.Sprintf("merge key << on line %d needs a mapping or a list of mappings", c.line(n))}
		}
		c.aliasNodes += len(im)
		if c.aliasNodes > maxAliasNodes {
			return tooManyAliases(path)
		}
		for k, v := range im {
			if _, set := dst[k]; !set {
				dst[k] = v
			}
		}
	}
	return nil
}

// key returns a mapping key. Only string keys survive the trip to JSON and
// protobuf, so `1: x`, `true: x` and `? [a]` are rejected, not stringified.
func (c *converter) key(kn *yaml.Node, path string) (key string, isMerge bool, e *Error) {
	if kn.Kind == yaml.AliasNode && kn.Alias != nil {
		kn = kn.Alias
	}
	if kn.Kind != yaml.ScalarNode {
		return "", false, &Error{Field: path, Reason: fmt.Sprintf("map key on line %d is %s; keys must be strings", c.line(kn), nodeKind(kn))}
	}
	switch tag := kn.ShortTag(); tag {
	case "!!str":
	case "!!merge":
		return "", true, nil
	case "!!int", "!!float", "!!bool", "!!null", "!!timestamp":
		return "", false, &Error{Field: path, Reason: fmt.Sprintf("map key %s on line %d is %s, not a string; quote it", quoteValue(kn.Value), c.line(kn), tagNoun(tag))}
	default:
		return "", false, unsupportedTag(path, tag)
	}
	if !utf8.ValidString(kn.Value) {
		return "", false, &Error{Field: path, Reason: fmt.Sprintf("map key on line %d is not valid UTF-8", c.line(kn))}
	}
	if c.aliasDepth > 0 {
		if err := c.countBytes(path, len(kn.Value)); err != nil {
			return "", false, err
		}
	}
	return kn.Value, false, nil
}

func (c *converter) scalar(n *yaml.Node, path string) (any, *Error) {
	tag := n.ShortTag()
	switch tag {
	case "!!str", "!!timestamp", "!!merge":
		// Timestamps keep the text the user wrote: reformatting it would
		// change the spec, and so its generation, on every apply.
		if !utf8.ValidString(n.Value) {
			return nil, &Error{Field: path, Reason: fmt.Sprintf("string on line %d is not valid UTF-8", c.line(n))}
		}
		if c.aliasDepth > 0 {
			if err := c.countBytes(path, len(n.Value)); err != nil {
				return nil, err
			}
		}
		// A plain number the resolver could not parse (1e400 overflows a
		// float64) falls back to a string; stored so, replicas: 1e400
		// would become "1e400". Only quoting makes it a string.
		if tag == "!!str" && n.Style == 0 && numberText.MatchString(n.Value) {
			return nil, &Error{Field: path, Reason: fmt.Sprintf("number %s is out of range (at most about ±1.8e308); quote it to keep it as a string", quoteValue(n.Value))}
		}
		return n.Value, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, &Error{Field: path, Reason: fmt.Sprintf("%s is not a boolean", quoteValue(n.Value))}
		}
		return b, nil
	case "!!int", "!!float":
		return c.number(n, path, tag)
	case "!!binary":
		return nil, &Error{Field: path, Reason: "tag !!binary is not supported; remove the tag and keep the base64 text as a string"}
	default:
		return nil, unsupportedTag(path, tag)
	}
}

// number keeps integers exact or rejects them: structpb stores float64, and
// silently rounding 9007199254740993 to ...992 would corrupt IDs and sizes.
func (c *converter) number(n *yaml.Node, path, tag string) (any, *Error) {
	tooLarge := func() *Error {
		return &Error{Field: path, Reason: fmt.Sprintf("integer %s is too large to store exactly (the limit is ±2^53); quote it to keep it as a string", quoteValue(n.Value))}
	}
	// The resolver has already parsed the number but keeps only the tag;
	// parsing again with its rules (underscores dropped, Go base prefixes)
	// is far cheaper than Node.Decode, which matters for 1 MiB of numbers.
	plain := strings.ReplaceAll(n.Value, "_", "")
	if i, err := strconv.ParseInt(plain, 0, 64); err == nil {
		if i > maxSafeInteger || i < -maxSafeInteger {
			return nil, tooLarge()
		}
		return float64(i), nil
	}
	if u, err := strconv.ParseUint(plain, 0, 64); err == nil {
		if u > maxSafeInteger {
			return nil, tooLarge()
		}
		return float64(u), nil
	}
	if tag == "!!float" {
		if f, err := strconv.ParseFloat(plain, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			if integerText(n.Value) && math.Abs(f) > maxSafeInteger {
				return nil, tooLarge()
			}
			return f, nil
		}
	}
	// Rare forms (.inf, .nan, -0b101) and explicit tags that do not fit.
	var x any
	if err := n.Decode(&x); err != nil {
		if integerText(n.Value) {
			return nil, tooLarge()
		}
		return nil, &Error{Field: path, Reason: fmt.Sprintf("%s is not %s", quoteValue(n.Value), tagNoun(tag))}
	}
	switch v := x.(type) {
	case int:
		if v > maxSafeInteger || v < -maxSafeInteger {
			return nil, tooLarge()
		}
		return float64(v), nil
	case int64:
		if v > maxSafeInteger || v < -maxSafeInteger {
			return nil, tooLarge()
		}
		return float64(v), nil
	case uint64:
		if v > maxSafeInteger {
			return nil, tooLarge()
		}
		return float64(v), nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, &Error{Field: path, Reason: fmt.Sprintf("%s is not a finite number and cannot be stored; quote it to keep it as a string", quoteValue(n.Value))}
		}
		// The resolver turns integers beyond 64 bits into floats.
		if integerText(n.Value) && math.Abs(v) > maxSafeInteger {
			return nil, tooLarge()
		}
		return v, nil
	default:
		return nil, &Error{Field: path, Reason: fmt.Sprintf("%s is not %s", quoteValue(n.Value), tagNoun(tag))}
	}
}

// countBytes bounds what alias expansion may add in text, which the node
// count alone does not: a thousand aliases of one 500 KiB string are few
// nodes but half a gigabyte once encoded.
func (c *converter) countBytes(path string, n int) *Error {
	c.aliasBytes += n
	if c.aliasBytes > MaxObjectBytes {
		return &Error{Field: path, Reason: fmt.Sprintf("too many aliases: expanding them creates more than %d bytes of text", MaxObjectBytes)}
	}
	return nil
}

// numberText matches what YAML 1.2's core schema reads as a decimal number.
var numberText = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

// integerText reports whether s is written as a decimal integer.
func integerText(s string) bool {
	s = strings.TrimLeft(s, "+-")
	if s == "" {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

func firstKey(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Value == key {
			return k
		}
	}
	return n
}

func unsupportedTag(path, tag string) *Error {
	return &Error{Field: path, Reason: fmt.Sprintf("tag %s is not supported; remove it", tag)}
}

func tooManyAliases(path string) *Error {
	return &Error{Field: path, Reason: fmt.Sprintf("too many aliases: expanding them creates more than %d nodes; write the values out or use fewer aliases", maxAliasNodes)}
}

func tooDeep(path string) *Error {
	return &Error{Field: path, Reason: fmt.Sprintf("nested deeper than %d levels", maxDepth)}
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return "not a string"
	}
}

func tagNoun(tag string) string {
	switch tag {
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	case "!!null":
		return "null"
	case "!!timestamp":
		return "a timestamp"
	}
	return tag
}
