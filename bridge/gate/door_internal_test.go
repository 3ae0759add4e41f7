package gate

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// specString reads one top-level string of an encoded spec as decoding it
// whole would.
func TestSpecString(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec map[string]any
		want string
	}{
		{"set", map[string]any{"containers": []any{map[string]any{"nodeName": "inner"}}, "nodeName": "n1", "restartPolicy": "Never"}, "n1"},
		{"absent", map[string]any{"containers": []any{map[string]any{"nodeName": "inner"}}}, ""},
		{"not a string", map[string]any{"nodeName": 3}, ""},
		{"nested only", map[string]any{"template": map[string]any{"nodeName": "n1"}}, ""},
		{"empty", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := structpb.NewStruct(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			b, err := proto.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			if got := specString(b, "nodeName"); got != tc.want {
				t.Fatalf("specString = %q, want %q", got, tc.want)
			}
			if got := specString(b[:len(b)/2], "nodeName"); got != "" && got != tc.want {
				t.Fatalf("specString of a truncated spec = %q", got)
			}
		})
	}
}
