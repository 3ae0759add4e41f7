package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/schemas"
)

const (
	// MaxObjectBytes limits one document's raw text, checked before it is
	// parsed, and one object's protobuf encoding, checked after.
	MaxObjectBytes = 1 << 20
	// MaxDocuments limits the documents in one input (empty ones included)
	// and the objects in one Decode or DecodePath call.
	MaxDocuments = 10000
)

// Decode parses and validates the manifests in data: a YAML stream, a JSON
// object or a JSON array of objects; kind: List documents are expanded. source
// names the input in errors (a file path, "-" for stdin, "request body").
//
// It returns every object, in input order, or an Errors holding every
// problem found (at most MaxErrors) and no objects. Empty input yields no
// objects and no error; whether that is a mistake is the caller's call.
// Decode does no I/O and keeps no state, so it is safe for concurrent use. It
// bounds the work per document, not the size of data: callers reading from
// the network must cap the body first.
func Decode(source string, data []byte) ([]*schemas.Object, error) {
	b := newBatch()
	b.decode(source, data)
	return b.result()
}

// DecodeKubernetes is Decode for objects bound for a Kubernetes cluster
// (a chart's objects when its release names a cluster): they are checked
// against Kubernetes' own types, and not against the rules of the Pods
// and Nodes jetplane runs itself.
func DecodeKubernetes(source string, data []byte) ([]*schemas.Object, error) {
	b := newBatch()
	b.kubernetes = true
	b.decode(source, data)
	return b.result()
}

// DecodePath decodes the file at path; or every *.yaml, *.yml and *.json file
// directly in the directory at path, in name order, as one batch (so an
// object defined in two files is an error); or stdin when path is "-". Files
// that cannot be read fail the call with the os error; problems in their
// content are returned as Errors.
func DecodePath(path string, stdin io.Reader) ([]*schemas.Object, error) {
	if path == "-" {
		if stdin == nil {
			return nil, errors.New(`manifest: path is "-" but there is no stdin to read`)
		}
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("read stdin: %w", err)
		}
		return Decode("-", data)
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		return Decode(path, data)
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	b := newBatch()
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		file := filepath.Join(path, e.Name())
		// Stat follows symlinks: a link to a file is read, a directory
		// named like a manifest, or a link to one, is not.
		fi, err := os.Stat(file)
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		b.decode(file, data)
		if b.full() {
			break
		}
	}
	return b.result()
}

// origin is where an object was first defined, for duplicate-key errors.
type origin struct {
	source string
	doc    int
}

// batch accumulates the objects and errors of one Decode or DecodePath call.
type batch struct {
	// kubernetes: the objects are bound for a Kubernetes cluster, so the
	// rules of the kinds jetplane runs itself (Pod, Node) do not apply.
	kubernetes bool
	objs       []*schemas.Object
	seen       map[string]origin
	errs       Errors
}

func newBatch() *batch {
	return &batch{seen: make(map[string]origin)}
}

func (b *batch) full() bool { return len(b.errs) >= MaxErrors }

func (b *batch) fail(e *Error) {
	if !b.full() {
		b.errs = append(b.errs, e)
	}
}

func (b *batch) result() ([]*schemas.Object, error) {
	if len(b.errs) > 0 {
		return nil, b.errs
	}
	return b.objs, nil
}

var utf8BOM = []byte("\xef\xbb\xbf")

func (b *batch) decode(source string, data []byte) {
	in := &input{b: b, source: source, data: bytes.TrimPrefix(data, utf8BOM), line: 1}
	if first := bytes.TrimLeft(in.data, " \t\r\n"); len(first) > 0 && first[0] == '[' {
		in.splitJSONArray(len(in.data) - len(first))
		return
	}
	in.splitStream()
}

// input splits one source into documents and numbers them.
type input struct {
	b      *batch
	source string
	data   []byte
	docs   int
	// line is the line number at offset off; documents arrive in order, so
	// counting newlines from the last document keeps numbering linear.
	off, line int
}

func (in *input) lineAt(off int) int {
	in.line += bytes.Count(in.data[in.off:off], []byte{'\n'})
	in.off = off
	return in.line
}

// splitStream cuts a YAML stream at lines holding only "---". Cutting the
// text ourselves, rather than letting the parser find documents, is what
// lets the size limit apply before any parsing. Blank or comment-only text
// before the first separator or after the last is not a document, so a file
// that starts with "---" numbers its first object 1.
func (in *input) splitStream() {
	data := in.data
	start, seps := 0, 0
	for pos := 0; pos < len(data); {
		end := bytes.IndexByte(data[pos:], '\n')
		next := len(data)
		if end >= 0 {
			end += pos
			next = end + 1
		} else {
			end = len(data)
		}
		if isSeparator(data[pos:end]) {
			if seps > 0 || !blank(data[start:pos]) {
				if !in.document(start, pos) {
					return
				}
			}
			seps++
			start = next
		}
		pos = next
	}
	if seps == 0 || !blank(data[start:]) {
		in.document(start, len(data))
	}
}

func isSeparator(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte("---"))
	return ok && len(bytes.Trim(rest, " \t\r")) == 0
}

// blank reports whether text holds only whitespace and comments.
func blank(text []byte) bool {
	for len(text) > 0 {
		line := text
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		line = bytes.TrimLeft(line, " \t\r")
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}

// splitJSONArray cuts a top-level JSON array into its elements, so that each
// element, not the whole array, is held to MaxObjectBytes. It tracks only
// strings and nesting; the YAML parser (JSON is YAML) then checks each
// element's syntax.
func (in *input) splitJSONArray(open int) {
	data := in.data
	notClosed := &Error{Source: in.source, Reason: "invalid JSON: the array is not closed; add ']' at the end"}
	pos := skipSpace(data, open+1)
	if pos < len(data) && data[pos] == ']' {
		pos++
	} else {
		for {
			if pos == len(data) {
				in.b.fail(notClosed)
				return
			}
			end := scanJSONValue(data, pos)
			if end == pos {
				e := &Error{Source: in.source, Doc: in.docs + 1, Reason: fmt.Sprintf("invalid JSON: unexpected %q where an array element should start", data[pos])}
				if data[pos] == ']' {
					e.Doc, e.Reason = in.docs, "invalid JSON: trailing comma after the last element"
				}
				in.b.fail(e)
				return
			}
			if !in.document(pos, end) {
				return
			}
			pos = skipSpace(data, end)
			if pos == len(data) {
				in.b.fail(notClosed)
				return
			}
			if data[pos] == ']' {
				pos++
				break
			}
			if data[pos] != ',' {
				in.b.fail(&Error{Source: in.source, Doc: in.docs, Reason: fmt.Sprintf("invalid JSON: unexpected %q after the element; expected ',' or ']'", data[pos])})
				return
			}
			pos = skipSpace(data, pos+1)
		}
	}
	if rest := skipSpace(data, pos); rest < len(data) {
		in.b.fail(&Error{Source: in.source, Reason: fmt.Sprintf("invalid JSON: unexpected content on line %d after the array", in.lineAt(rest))})
	}
}

// scanJSONValue returns the end of the value starting at pos: the first ','
// or closing bracket outside any string or nesting, or the end of data.
func scanJSONValue(data []byte, pos int) int {
	depth, inString := 0, false
	for i := pos; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return trimSpaceEnd(data, pos, i)
			}
			depth--
		case ',':
			if depth == 0 {
				return trimSpaceEnd(data, pos, i)
			}
		}
	}
	return len(data)
}

func trimSpaceEnd(data []byte, start, end int) int {
	for end > start && isSpace(data[end-1]) {
		end--
	}
	return end
}

func skipSpace(data []byte, pos int) int {
	for pos < len(data) && isSpace(data[pos]) {
		pos++
	}
	return pos
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// document numbers, size-checks, parses and validates data[start:end]. It
// reports whether decoding should go on.
func (in *input) document(start, end int) bool {
	in.docs++
	doc := in.docs
	fail := func(e *Error) {
		e.Source, e.Doc = in.source, doc
		in.b.fail(e)
	}
	if doc > MaxDocuments {
		fail(&Error{Reason: fmt.Sprintf("too many documents: the limit is %d per input; split the input", MaxDocuments)})
		return false
	}
	raw := in.data[start:end]
	if len(raw) > MaxObjectBytes {
		fail(&Error{Reason: fmt.Sprintf("document is %d bytes, more than the limit of %d (1 MiB); split it into smaller objects", len(raw), MaxObjectBytes)})
		return !in.b.full()
	}
	lineBase := in.lineAt(start) - 1
	val, err := fastJSON(raw)
	if err != nil {
		root, perr := parseYAML(raw, lineBase)
		if perr != nil {
			fail(perr)
			return !in.b.full()
		}
		if root == nil {
			return true
		}
		conv := converter{lineBase: lineBase}
		var cerr *Error
		if val, cerr = conv.value(root, "", 0); cerr != nil {
			fail(cerr)
			return !in.b.full()
		}
	}
	in.objects(val, doc, fail)
	return !in.b.full()
}

// objects validates one document's parsed value and keeps its objects.
func (in *input) objects(val any, doc int, fail func(*Error)) {
	objs, verrs := objectsOf(val, in.b.kubernetes)
	for _, e := range verrs {
		fail(e)
	}
	for _, o := range objs {
		if !in.add(o, doc, fail) {
			break
		}
	}
}

// add checks what needs the whole object or the whole batch — encoded size,
// object count, unique keys — and keeps the object.
func (in *input) add(o decoded, doc int, fail func(*Error)) bool {
	field := o.path
	if size := proto.Size(o.obj); size > MaxObjectBytes {
		fail(&Error{Field: field, Reason: fmt.Sprintf("object is %d bytes encoded, more than the limit of %d (1 MiB)", size, MaxObjectBytes)})
		return !in.b.full()
	}
	if len(in.b.objs) >= MaxDocuments {
		fail(&Error{Field: field, Reason: fmt.Sprintf("too many objects: the limit is %d per apply", MaxDocuments)})
		return false
	}
	key := KeyString(KeyOf(o.obj))
	if first, dup := in.b.seen[key]; dup {
		where := fmt.Sprintf("document %d", first.doc)
		if first.source != in.source {
			where = first.source + ", " + where
		}
		fail(&Error{Field: fieldPath(fieldPath(field, "metadata"), "name"), Reason: fmt.Sprintf("object %s is already defined in %s; each object may appear once per apply", key, where)})
		return !in.b.full()
	}
	in.b.seen[key] = origin{in.source, doc}
	in.b.objs = append(in.b.objs, o.obj)
	return true
}
