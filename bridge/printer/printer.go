// Package printer formats objects the way kubectl users expect: -o table,
// wide, name, json, yaml, jsonpath=TEMPLATE and custom-columns=SPEC, with
// --sort-by, --show-labels and --no-headers, and a streaming table whose
// columns stay aligned row after row for watches. It formats only; the CLI
// fetches.
package printer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/client-go/util/jsonpath"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// Formats lists the -o values, for help and errors.
const Formats = "table, wide, name, json, yaml, jsonpath=TEMPLATE, custom-columns=NAME:PATH,..."

// Options describe one output.
type Options struct {
	// Format is the -o value.
	Format     string
	NoHeaders  bool
	ShowLabels bool
	// SortBy is a JSONPath (".metadata.name" or "{.metadata.name}").
	SortBy string
	// Reconciler names what reconciles a kind ("" when nothing does); the
	// wide table shows it. Nil: unknown.
	Reconciler func(kind string) string
	// Columns are a kind's printer columns (a CustomResourceDefinition's
	// additionalPrinterColumns); a table of objects all of one kind that
	// has some shows them after NAME. Nil: none.
	Columns func(kind string) []Column
	// Now is the time ages are measured against.
	Now time.Time
}

// Column is one printer column of a kind: a header and the JSONPath of
// its value; Priority above 0 shows only in wide output, as in kubectl.
type Column struct {
	Name     string
	JSONPath string
	Priority int32
}

// Item is one object: its JSON as the API sent it, and decoded.
type Item struct {
	Raw    json.RawMessage
	Object *schemas.Object
}

// Decode pairs raw objects with their decoded form.
func Decode(raws []json.RawMessage, decode func(json.RawMessage) (*schemas.Object, error)) ([]Item, error) {
	out := make([]Item, len(raws))
	for i, r := range raws {
		o, err := decode(r)
		if err != nil {
			return nil, fmt.Errorf("server sent a bad object: %w", err)
		}
		out[i] = Item{Raw: r, Object: o}
	}
	return out, nil
}

// Check validates o before anything is fetched.
func (o Options) Check() error {
	switch f := o.Format; {
	case f == "", f == "table", f == "wide", f == "name", f == "json", f == "yaml":
	case strings.HasPrefix(f, "jsonpath="):
		if _, err := parsePath(strings.TrimPrefix(f, "jsonpath=")); err != nil {
			return fmt.Errorf("-o jsonpath: %w", err)
		}
	case strings.HasPrefix(f, "custom-columns="):
		if _, err := parseColumns(strings.TrimPrefix(f, "custom-columns=")); err != nil {
			return err
		}
	default:
		return fmt.Errorf("-o: %q is not an output format; use one of %s", f, Formats)
	}
	if o.SortBy != "" {
		if _, err := parsePath(o.SortBy); err != nil {
			return fmt.Errorf("--sort-by: %w", err)
		}
	}
	return nil
}

// Print writes items in o's format. single says the user asked for one
// object (json and yaml then print it alone, not a list).
func Print(w io.Writer, items []Item, single bool, o Options) error {
	if err := o.Check(); err != nil {
		return err
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.SortBy != "" {
		if err := sortItems(items, o.SortBy); err != nil {
			return err
		}
	}
	switch f := o.Format; {
	case f == "json":
		if single && len(items) == 1 {
			return writeIndented(w, items[0].Raw)
		}
		return writeIndented(w, listJSON(items))
	case f == "yaml":
		if single && len(items) == 1 {
			return WriteYAML(w, items[0].Raw)
		}
		return WriteYAML(w, listJSON(items))
	case f == "name":
		for _, it := range items {
			if _, err := fmt.Fprintln(w, projections.ObjectKey(it.Object).String()); err != nil {
				return err
			}
		}
		return nil
	case strings.HasPrefix(f, "jsonpath="):
		p, _ := parsePath(strings.TrimPrefix(f, "jsonpath="))
		var data any
		if single && len(items) == 1 {
			data = generic(items[0].Raw)
		} else {
			data = generic(listJSON(items))
		}
		if err := p.Execute(w, data); err != nil {
			return fmt.Errorf("-o jsonpath: %w", err)
		}
		_, err := fmt.Fprintln(w)
		return err
	case strings.HasPrefix(f, "custom-columns="):
		cols, _ := parseColumns(strings.TrimPrefix(f, "custom-columns="))
		t := &Table{Columns: make([]string, len(cols))}
		for i, c := range cols {
			t.Columns[i] = c.header
		}
		for _, it := range items {
			data := generic(it.Raw)
			row := make([]string, len(cols))
			for i, c := range cols {
				row[i] = c.value(data)
			}
			t.Rows = append(t.Rows, row)
		}
		return t.Write(w, o.NoHeaders)
	}
	if t, ok := kindTable(items, o); ok {
		return t.Write(w, o.NoHeaders)
	}
	t := NewTable(o)
	extra := kindColumns(items, o)
	if len(extra) > 0 {
		t.Columns = withColumns(t.Columns, extra, func(c column) string { return c.header })
	}
	for _, it := range items {
		row := ObjectRow(it.Object, o)
		if len(extra) > 0 {
			data := generic(it.Raw)
			row = withColumns(row, extra, func(c column) string { return c.value(data) })
		}
		t.Rows = append(t.Rows, row)
	}
	return t.Write(w, o.NoHeaders)
}

// kindColumns are the printer columns to show: those of the one kind all
// items have, without the wide-only ones unless the format is wide.
func kindColumns(items []Item, o Options) []column {
	if o.Columns == nil || len(items) == 0 {
		return nil
	}
	kind := projections.ObjectKey(items[0].Object).Kind
	for _, it := range items[1:] {
		if projections.ObjectKey(it.Object).Kind != kind {
			return nil
		}
	}
	var out []column
	for _, c := range o.Columns(kind) {
		if c.Priority > 0 && o.Format != "wide" {
			continue
		}
		p, err := parsePath(c.JSONPath)
		if err != nil {
			continue // a CRD's paths were checked when it was applied
		}
		out = append(out, column{header: strings.ToUpper(c.Name), path: p})
	}
	return out
}

// withColumns puts the printer columns' cells after NAME (the third
// column), as kubectl puts them after its NAME.
func withColumns(row []string, cols []column, cell func(column) string) []string {
	const after = 3
	out := make([]string, 0, len(row)+len(cols))
	out = append(out, row[:after]...)
	for _, c := range cols {
		out = append(out, cell(c))
	}
	return append(out, row[after:]...)
}

func listJSON(items []Item) json.RawMessage {
	raws := make([]json.RawMessage, len(items))
	for i, it := range items {
		raws[i] = it.Raw
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": raws})
	return b
}

func writeIndented(w io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// WriteYAML writes JSON as YAML, keeping the JSON's key order (apiVersion,
// kind, metadata, spec, status).
func WriteYAML(w io.Writer, raw json.RawMessage) error {
	y, err := ToYAML(raw)
	if err != nil {
		return err
	}
	_, err = w.Write(y)
	return err
}

// ToYAML converts JSON to block-style YAML, keeping key order.
func ToYAML(raw []byte) ([]byte, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(raw, &n); err != nil {
		return nil, err
	}
	blockStyle(&n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}

// yaml11Scalar matches the strings a YAML 1.1 reader (kubectl's, helm's)
// takes for a boolean or a base-60 number: printed plain, "no" would come
// back as false.
var yaml11Scalar = regexp.MustCompile(`^(y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF|[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?)$`)

func blockStyle(n *yaml.Node) {
	n.Style = 0
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && yaml11Scalar.MatchString(n.Value) {
		n.Style = yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

func generic(raw json.RawMessage) any {
	var v any
	_ = json.Unmarshal(raw, &v)
	return v
}

// parsePath accepts kubectl's forms: "{.a.b}", ".a.b", "a.b".
func parsePath(expr string) (*jsonpath.JSONPath, error) {
	if !strings.Contains(expr, "{") {
		if !strings.HasPrefix(expr, ".") && !strings.HasPrefix(expr, "[") {
			expr = "." + expr
		}
		expr = "{" + expr + "}"
	}
	p := jsonpath.New("output").AllowMissingKeys(true)
	if err := p.Parse(expr); err != nil {
		return nil, err
	}
	return p, nil
}

type column struct {
	header string
	path   *jsonpath.JSONPath
}

func (c column) value(data any) string {
	var buf bytes.Buffer
	if err := c.path.Execute(&buf, data); err != nil || buf.Len() == 0 {
		return "<none>"
	}
	return buf.String()
}

func parseColumns(spec string) ([]column, error) {
	var cols []column
	for _, part := range strings.Split(spec, ",") {
		h, p, ok := strings.Cut(part, ":")
		if !ok || h == "" || p == "" {
			return nil, fmt.Errorf("-o custom-columns: %q: want HEADER:JSONPATH, such as NAME:.metadata.name", part)
		}
		path, err := parsePath(p)
		if err != nil {
			return nil, fmt.Errorf("-o custom-columns: %s: %w", h, err)
		}
		cols = append(cols, column{header: h, path: path})
	}
	return cols, nil
}

func sortItems(items []Item, expr string) error {
	p, err := parsePath(expr)
	if err != nil {
		return fmt.Errorf("--sort-by: %w", err)
	}
	type keyed struct {
		s   string
		n   float64
		num bool
	}
	keys := make([]keyed, len(items))
	for i, it := range items {
		res, err := p.FindResults(generic(it.Raw))
		if err != nil || len(res) == 0 || len(res[0]) == 0 {
			continue
		}
		v := res[0][0].Interface()
		switch x := v.(type) {
		case float64:
			keys[i] = keyed{n: x, num: true}
		case string:
			var f float64
			if _, err := fmt.Sscanf(x, "%g", &f); err == nil && fmt.Sprint(f) == x {
				keys[i] = keyed{s: x, n: f, num: true}
			} else {
				keys[i] = keyed{s: x}
			}
		default:
			keys[i] = keyed{s: fmt.Sprint(x)}
		}
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ka, kb := keys[idx[a]], keys[idx[b]]
		if ka.num && kb.num {
			return ka.n < kb.n
		}
		return ka.s < kb.s
	})
	sorted := make([]Item, len(items))
	for i, j := range idx {
		sorted[i] = items[j]
	}
	copy(items, sorted)
	return nil
}
