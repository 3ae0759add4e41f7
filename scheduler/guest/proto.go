package guest

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
)

var errBadProto = errors.New("guest: malformed protobuf")

// field walks the fields of a message, calling fn with each field's number,
// type and raw value (bytes for length-delimited fields, the varint for
// varints).
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, raw []byte, v uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errBadProto
		}
		b = b[n:]
		var raw []byte
		var v uint64
		switch typ {
		case protowire.BytesType:
			raw, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return errBadProto
		}
		b = b[n:]
		if err := fn(num, typ, raw, v); err != nil {
			return err
		}
	}
	return nil
}

func mapEntry(m map[string]string, raw []byte) (map[string]string, error) {
	var k, v string
	err := fields(raw, func(num protowire.Number, typ protowire.Type, raw []byte, _ uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			k = string(raw)
		case num == 2 && typ == protowire.BytesType:
			v = string(raw)
		}
		return nil
	})
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m, err
}

// appendEntry appends a well-formed map entry as a Label.
func appendEntry(list []Label, raw []byte) []Label {
	var l Label
	_ = fields(raw, func(num protowire.Number, typ protowire.Type, raw []byte, _ uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			l.Key = string(raw)
		case num == 2 && typ == protowire.BytesType:
			l.Value = string(raw)
		}
		return nil
	})
	return append(list, l)
}

// meta decodes the ObjectMeta fields name (1), namespace (3), labels (11).
func meta(raw []byte, name, namespace *string, labels *map[string]string) error {
	return fields(raw, func(num protowire.Number, typ protowire.Type, raw []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		var err error
		switch num {
		case 1:
			*name = string(raw)
		case 3:
			*namespace = string(raw)
		case 11:
			*labels, err = mapEntry(*labels, raw)
		}
		return err
	})
}

// DecodeNode decodes a v1.Node in Kubernetes protobuf.
func DecodeNode(b []byte) (*Node, error) {
	n := &Node{}
	var ns string
	err := fields(b, func(num protowire.Number, typ protowire.Type, raw []byte, _ uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			return meta(raw, &n.Name, &ns, &n.Labels)
		case num == 2 && typ == protowire.BytesType:
			return fields(raw, func(num protowire.Number, typ protowire.Type, raw []byte, v uint64) error {
				switch {
				case num == 4 && typ == protowire.VarintType:
					n.Unschedulable = v != 0
				case num == 5 && typ == protowire.BytesType:
					var t Taint
					err := fields(raw, func(num protowire.Number, typ protowire.Type, raw []byte, _ uint64) error {
						if typ == protowire.BytesType {
							switch num {
							case 1:
								t.Key = string(raw)
							case 2:
								t.Value = string(raw)
							case 3:
								t.Effect = string(raw)
							}
						}
						return nil
					})
					n.Taints = append(n.Taints, t)
					return err
				}
				return nil
			})
		}
		return nil
	})
	return n, err
}

// DecodePod decodes a v1.Pod in Kubernetes protobuf.
func DecodePod(b []byte) (*Pod, error) {
	p := &Pod{}
	err := fields(b, func(num protowire.Number, typ protowire.Type, raw []byte, _ uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			return meta(raw, &p.Name, &p.Namespace, &p.Labels)
		case num == 2 && typ == protowire.BytesType:
			return fields(raw, func(num protowire.Number, typ protowire.Type, raw []byte, _ uint64) error {
				if typ != protowire.BytesType {
					return nil
				}
				var err error
				switch num {
				case 7:
					p.NodeSelector, err = mapEntry(p.NodeSelector, raw)
					if err == nil {
						p.NodeSelectorList = appendEntry(p.NodeSelectorList, raw)
					}
				case 10:
					p.NodeName = string(raw)
				}
				return err
			})
		}
		return nil
	})
	return p, err
}
