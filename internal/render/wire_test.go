package render

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
)

// Values cross to the render child with their Go types: the int64 of
// --set or of a Kubernetes object stays an int64, a float64 a float64.
func TestValuesKeepTheirTypes(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   any
		want any
	}{
		{"nil", nil, nil},
		{"string", "a", "a"},
		{"bools", []any{true, false}, []any{true, false}},
		{"float64", 0.5, 0.5},
		{"whole float64", float64(3), float64(3)},
		{"int64", int64(3), int64(3)},
		{"int", 3, 3},
		{"uint64", uint64(math.MaxUint64), uint64(math.MaxUint64)},
		{"large int64", int64(math.MaxInt64), int64(math.MaxInt64)},
		{"infinity", math.Inf(1), math.Inf(1)},
		{"nested", map[string]any{"a": []any{int64(1), map[string]any{"b": nil}}}, map[string]any{"a": []any{int64(1), map[string]any{"b": nil}}}},
		{"chartutil.Values", chartutil.Values{"a": int64(1)}, map[string]any{"a": int64(1)}},
		{"other types as JSON", []string{"x"}, []any{"x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(encodeValue(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			var v *value
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			if got := v.decode(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("%#v crossed as %#v, want %#v", tc.in, got, tc.want)
			}
		})
	}
}

// Every option but Lookup crosses to the render child, those added later
// too.
func TestOptionsCross(t *testing.T) {
	var opts Options
	v := reflect.ValueOf(&opts).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x" + v.Type().Field(i).Name)
		case reflect.Int:
			f.SetInt(int64(i + 1))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{v.Type().Field(i).Name}))
		case reflect.Map:
			f.Set(reflect.ValueOf(map[string]any{"n": int64(i)}))
		case reflect.Interface:
			continue // Lookup: answered over the pipe
		default:
			t.Fatalf("Options.%s: a %s; teach this test to fill it", v.Type().Field(i).Name, f.Kind())
		}
	}
	b, err := json.Marshal(newRequest(loadFiles(t, map[string]string{"Chart.yaml": "apiVersion: v2\nname: x\nversion: 0.1.0\n"}), opts))
	if err != nil {
		t.Fatal(err)
	}
	var req request
	if err := json.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	if got := req.options(); !reflect.DeepEqual(got, opts) {
		t.Fatalf("options crossed as %+v, want %+v", got, opts)
	}
}
