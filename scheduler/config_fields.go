package scheduler

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// unknownField finds the first key of a config that names no field, and
// says where it is and which fields exist there: the decoder's own error
// names a Go type ("field plugin not found in type
// scheduler.ProfileConfig"), which a config's author cannot act on. Nil
// when every key is known, or when data is not YAML (the decoder's error
// says that better).
func unknownField(data []byte, t reflect.Type) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil || len(root.Content) == 0 {
		return nil
	}
	return walkFields(root.Content[0], t, "")
}

func walkFields(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fields := map[string]reflect.Type{}
		var names []string
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			if name == "-" || !f.IsExported() {
				continue
			}
			fields[name] = f.Type
			names = append(names, name)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i]
			p := key.Value
			if path != "" {
				p = path + "." + key.Value
			}
			ft, ok := fields[key.Value]
			if !ok {
				return fmt.Errorf("line %d: %s: unknown field; the fields of %s are %s", key.Line, p, orTop(path), strings.Join(names, ", "))
			}
			if err := walkFields(n.Content[i+1], ft, p); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, c := range n.Content {
			if err := walkFields(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func orTop(path string) string {
	if path == "" {
		return "the top level"
	}
	return path
}
