package render

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
)

// The render child and its parent speak in frames on the child's standard
// input and output: a kind byte, a 4-byte big-endian length and that many
// bytes of JSON.
const (
	frameRequest = 'Q' // parent → child: the chart and the options
	frameAnswer  = 'A' // parent → child: what a lookup found
	frameLookup  = 'L' // child → parent: a chart's lookup call
	frameHeader  = 'H' // child → parent: the result's header, or its error
	frameObject  = 'O' // child → parent: one rendered object or hook
)

// errFrameTooLarge is a frame over the reader's limit.
var errFrameTooLarge = errors.New("frame over the limit")

func writeFrame(w *bufio.Writer, kind byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > math.MaxUint32 {
		return errFrameTooLarge
	}
	var h [5]byte
	h[0] = kind
	binary.BigEndian.PutUint32(h[1:], uint32(len(b)))
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	return w.Flush()
}

// readFrame reads one frame of at most limit bytes.
func readFrame(r io.Reader, limit int64) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := int64(binary.BigEndian.Uint32(h[1:]))
	if n > limit {
		return h[0], nil, fmt.Errorf("%w: %d bytes", errFrameTooLarge, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, nil, err
	}
	return h[0], b, nil
}

// request is what the child renders. Options cross as JSON, every field
// but Lookup (answered over the pipe) and Values (which keep their types
// in Values).
type request struct {
	Chart   *wireChart
	Options Options
	Values  *value
	// Lookup says the parent answers the chart's lookup calls.
	Lookup bool
}

func newRequest(c *chart.Chart, opts Options) request {
	r := request{Chart: toWireChart(c), Options: opts, Lookup: opts.Lookup != nil}
	if opts.Values != nil {
		r.Values = encodeValue(opts.Values)
	}
	r.Options.Values, r.Options.Lookup = nil, nil
	return r
}

// options are the request's options, lookups aside.
func (r request) options() Options {
	o := r.Options
	if r.Values != nil {
		o.Values, _ = r.Values.decode().(map[string]any)
	}
	return o
}

// wireChart is what rendering reads of a chart.
type wireChart struct {
	Metadata  *chart.Metadata
	Lock      *chart.Lock
	Templates []*chart.File
	Values    *value
	Schema    []byte
	Files     []*chart.File
	Deps      []*wireChart
}

func toWireChart(c *chart.Chart) *wireChart {
	w := &wireChart{Metadata: c.Metadata, Lock: c.Lock, Templates: c.Templates, Schema: c.Schema, Files: c.Files}
	if c.Values != nil {
		w.Values = encodeValue(c.Values)
	}
	for _, d := range c.Dependencies() {
		w.Deps = append(w.Deps, toWireChart(d))
	}
	return w
}

func (w *wireChart) chart() *chart.Chart {
	c := &chart.Chart{Metadata: w.Metadata, Lock: w.Lock, Templates: w.Templates, Schema: w.Schema, Files: w.Files}
	if w.Values != nil {
		c.Values, _ = w.Values.decode().(map[string]any)
	}
	for _, d := range w.Deps {
		c.AddDependency(d.chart())
	}
	return c
}

// header opens the child's answer: the render's error, or its Result
// without its objects and hooks, which follow, each a frame of its own.
type header struct {
	Err     *Error
	Result  *Result
	Objects int
	Hooks   int
}

// wireObject is an Object: its stored form in protobuf, the rest as JSON
// (the manifest was read from JSON, so JSON gives it back as it was).
type wireObject struct {
	Object
	Proto []byte
}

// lookupCall is one call of a chart's lookup: Name empty lists.
type lookupCall struct {
	APIVersion, Kind, Namespace, Name string
}

// lookupAnswer is what the parent's lookup found: the object or list as
// helm's lookup returns it, not found, or an error's message.
type lookupAnswer struct {
	Content  *value
	NotFound bool
	Err      string
}

// value carries one value of a chart's values or of what a lookup found
// with its Go type: JSON would turn the int64 of `--set replicas=3` or of a
// Kubernetes object into a float64, and templates print and compare the
// two differently.
type value struct {
	T byte              `json:"t"`
	S string            `json:"s,omitempty"`
	F float64           `json:"f,omitempty"`
	I int64             `json:"i,omitempty"`
	U uint64            `json:"u,omitempty"`
	L []*value          `json:"l,omitempty"`
	M map[string]*value `json:"m,omitempty"`
}

// Type codes of a value; other types cross as JSON ('j') and come back as
// JSON decodes them.
const (
	tNil       = 'z'
	tString    = 's'
	tBool      = 'b'
	tFloat     = 'f'
	tFloatText = 'F' // NaN and the infinities, which JSON has not
	tInt64     = 'i'
	tInt       = 'n'
	tUint64    = 'u'
	tList      = 'l'
	tMap       = 'm'
	tJSON      = 'j'
	tBadJSON   = 'x'
)

func encodeValue(v any) *value {
	switch v := v.(type) {
	case nil:
		return &value{T: tNil}
	case string:
		return &value{T: tString, S: v}
	case bool:
		if v {
			return &value{T: tBool, I: 1}
		}
		return &value{T: tBool}
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return &value{T: tFloatText, S: strconv.FormatFloat(v, 'g', -1, 64)}
		}
		return &value{T: tFloat, F: v}
	case int64:
		return &value{T: tInt64, I: v}
	case int:
		return &value{T: tInt, I: int64(v)}
	case uint64:
		return &value{T: tUint64, U: v}
	case []any:
		w := &value{T: tList, L: make([]*value, len(v))}
		for i, e := range v {
			w.L[i] = encodeValue(e)
		}
		return w
	case map[string]any:
		return encodeMap(v)
	case chartutil.Values:
		return encodeMap(v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return &value{T: tBadJSON, S: fmt.Sprint(v)}
	}
	return &value{T: tJSON, S: string(b)}
}

func encodeMap(m map[string]any) *value {
	w := &value{T: tMap, M: make(map[string]*value, len(m))}
	for k, e := range m {
		w.M[k] = encodeValue(e)
	}
	return w
}

func (w *value) decode() any {
	if w == nil {
		return nil
	}
	switch w.T {
	case tString:
		return w.S
	case tBool:
		return w.I != 0
	case tFloat:
		return w.F
	case tFloatText:
		f, _ := strconv.ParseFloat(w.S, 64)
		return f
	case tInt64:
		return w.I
	case tInt:
		return int(w.I)
	case tUint64:
		return w.U
	case tList:
		l := make([]any, len(w.L))
		for i, e := range w.L {
			l[i] = e.decode()
		}
		return l
	case tMap:
		m := make(map[string]any, len(w.M))
		for k, e := range w.M {
			m[k] = e.decode()
		}
		return m
	case tJSON:
		var v any
		if json.Unmarshal([]byte(w.S), &v) != nil {
			return w.S
		}
		return v
	case tBadJSON:
		return w.S
	}
	return nil
}
