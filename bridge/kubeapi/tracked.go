package kubeapi

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/jetplane/jetplane/internal/jsonvalue"
)

// Field management (track) converts both objects of every write to typed
// values, compares them and encodes the managers' field sets: the largest
// single cost of a write through the Kubernetes API. Writes of one kind by
// one controller mostly differ only in their values (names, times,
// counters), which field sets do not hold. trackedMemo keeps the
// managedFields a field manager computed, keyed by everything its result
// depends on:
//
//   - the field manager (kind, version, subresource, definition) and the
//     manager's name;
//   - the second it runs in (managedFields record times to the second);
//   - the shape of the live and the new object: every map key, at every
//     scalar the kind of value on each side and whether the two are equal
//     (a changed value moves the field to the manager), and lists whole
//     (the keys of associative lists are values);
//   - verbatim: both objects' managedFields (times included) and
//     annotations.
//
// Equal keys give equal results: a hit returns a copy of what the field
// manager returned for the first write of that shape. TestTrackedMemo
// holds it against the field manager itself.
type trackedMemo = ringCache[string, trackedResult]

func newTrackedMemo(n int) *trackedMemo { return newRingCache[string, trackedResult](n) }

// trackedNow is the clock of the memo's keys.
var trackedNow = time.Now

type trackedResult struct {
	// fm is the field manager that computed it: held, so that its address
	// (in the key) names no other while the entry lasts.
	fm            *managedfields.FieldManager
	managedFields any
	ok            bool // the result had managedFields
}

// maxTrackedKey bounds the keys kept: larger objects are tracked without
// the memo.
const maxTrackedKey = 8 << 10

var trackedResults = newTrackedMemo(1024)

// trackedKey writes into b the memo's key for fm's update of live to
// next by manager at now, and returns it (b's bytes); nil when the
// objects are too large to keep.
func trackedKey(b *bytes.Buffer, fm *managedfields.FieldManager, manager string, now time.Time, live, next map[string]any) []byte {
	// What fmt's "%p\x00%q\x00%d\x00" makes of fm, manager and the second.
	b.WriteString("0x")
	b.Write(strconv.AppendUint(b.AvailableBuffer(), uint64(reflect.ValueOf(fm).Pointer()), 16))
	b.WriteByte(0)
	b.Write(strconv.AppendQuote(b.AvailableBuffer(), manager))
	b.WriteByte(0)
	b.Write(strconv.AppendInt(b.AvailableBuffer(), now.Unix(), 10))
	b.WriteByte(0)
	shapePair(b, live, next, 0, "")
	if b.Len() > maxTrackedKey {
		return nil
	}
	return b.Bytes()
}

// keyBuffer is a buffer for trackedKey, kept between writes; put it back
// with putKeyBuffer once the key is no longer read.
func keyBuffer() *bytes.Buffer { return keyBuffers.Get().(*bytes.Buffer) }

func putKeyBuffer(b *bytes.Buffer) {
	if b.Cap() <= 4*maxTrackedKey {
		b.Reset()
		keyBuffers.Put(b)
	}
}

// keyBuffers are trackedKey's buffers, kept between writes.
var keyBuffers = sync.Pool{New: func() any { return bytes.NewBuffer(make([]byte, 0, 1024)) }}

// verbatim reports whether the field at depth, named name under parent,
// goes into the key whole: a top-level object's metadata.managedFields
// and metadata.annotations.
func verbatim(depth int, parent, name string) bool {
	return depth == 1 && parent == "metadata" && (name == "managedFields" || name == "annotations")
}

// shapePair writes the shape of a and b (values at the same path of the
// live and the new object; absent is nil with present false).
func shapePair(b *bytes.Buffer, x, y any, depth int, name string) {
	xm, xok := x.(map[string]any)
	ym, yok := y.(map[string]any)
	if !xok || !yok {
		b.WriteByte('(')
		shapeOne(b, x, depth, name)
		b.WriteByte('|')
		shapeOne(b, y, depth, name)
		if isScalar(x) && isScalar(y) && scalarEqual(x, y) {
			b.WriteByte('=')
		}
		b.WriteByte(')')
		return
	}
	keys := make([]string, 0, len(xm)+len(ym))
	for k := range xm {
		keys = append(keys, k)
	}
	for k := range ym {
		if _, ok := xm[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	b.WriteByte('{')
	for _, k := range keys {
		b.Write(strconv.AppendQuote(b.AvailableBuffer(), k))
		xv, inX := xm[k]
		yv, inY := ym[k]
		switch {
		case verbatim(depth, name, k):
			b.WriteByte('V')
			writeKeyJSON(b, xv, inX)
			if inX && inY && sameJSON(xv, yv) {
				// The same value on both sides (a client sending back
				// the managedFields it read): '=' where the second JSON
				// would be, which no JSON text begins with.
				b.WriteByte('=')
			} else {
				writeKeyJSON(b, yv, inY)
			}
		case inX && inY:
			shapePair(b, xv, yv, depth+1, k)
		case inX:
			b.WriteByte('L')
			shapeOne(b, xv, depth+1, k)
		default:
			b.WriteByte('N')
			shapeOne(b, yv, depth+1, k)
		}
		b.WriteByte(',')
	}
	b.WriteByte('}')
}

// shapeOne writes the shape of one side's value v.
func shapeOne(b *bytes.Buffer, v any, depth int, name string) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for _, k := range keys {
			b.Write(strconv.AppendQuote(b.AvailableBuffer(), k))
			if verbatim(depth, name, k) {
				b.WriteByte('V')
				writeKeyJSON(b, v[k], true)
			} else {
				shapeOne(b, v[k], depth+1, k)
			}
			b.WriteByte(',')
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('A')
		writeKeyJSON(b, v, true)
	case nil:
		b.WriteByte('z')
	case string:
		b.WriteByte('s')
	case bool:
		b.WriteByte('b')
	case int64:
		b.WriteByte('i')
	case float64:
		if v == math.Trunc(v) {
			b.WriteByte('I') // a whole number: types as an integer
		} else {
			b.WriteByte('f')
		}
	default:
		// Any other type: by its value, which is always exact.
		fmt.Fprintf(b, "%T", v)
		writeKeyJSON(b, v, true)
	}
}

// sameJSON reports whether x and y, values as JSON decodes them, are
// equal (and so encode alike); false for values of other types.
func sameJSON(x, y any) bool {
	switch x := x.(type) {
	case map[string]any:
		y, ok := y.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !sameJSON(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := y.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case string, bool, float64, nil:
		return scalarEqual(x, y)
	}
	return false
}

func isScalar(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return false
	}
	return true
}

func scalarEqual(x, y any) bool {
	switch x := x.(type) {
	case string:
		y, ok := y.(string)
		return ok && x == y
	case bool:
		y, ok := y.(bool)
		return ok && x == y
	case int64:
		y, ok := y.(int64)
		return ok && x == y
	case float64:
		y, ok := y.(float64)
		return ok && x == y
	case nil:
		return y == nil
	}
	return false
}

// writeKeyJSON writes v's JSON, or a marker for an absent value.
func writeKeyJSON(b *bytes.Buffer, v any, present bool) {
	if !present {
		b.WriteString("<absent>")
		return
	}
	// Encoded in place, in the buffer's free space.
	j, err := jsonvalue.Append(b.AvailableBuffer(), v)
	if err != nil {
		fmt.Fprintf(b, "<%v>", err)
		return
	}
	b.Write(j)
}

// copyResult is the memo's own copy of a result, apart from the write
// that computed it; what the memo hands out is shared and read-only.
func copyResult(v any) any {
	if v == nil {
		return nil
	}
	return runtime.DeepCopyJSONValue(v)
}
