package events

import (
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jetplane/jetplane/schemas"
)

// A replay decodes every event of the log, and proto.Unmarshal (driven by
// reflection, a string copied per field, a heap object per message) was its
// largest single cost. fastRecord decodes the one message replay folds,
// EventRecord, by hand: strings and the spec share the payload's memory
// instead of copying it, and the messages that live and die together come
// from one allocation.
//
// It handles exactly the events jetplane writes (every field known, each
// with its own wire type, strings valid UTF-8) and gives up on anything
// else — an unknown field, a wire type that does not match, invalid UTF-8,
// a truncated field — so that the caller decodes that event with
// proto.Unmarshal. Either way the result is the same record (or the same
// error): the fast path is an optimisation, never a second reading of the
// format. TestFastRecordMatchesUnmarshal checks both on random and on
// malformed payloads.

// eventBlock is an event record with its key and time: they are used
// together and dropped together once folded.
type eventBlock struct {
	ev   schemas.EventRecord
	key  schemas.ObjectKey
	time timestamppb.Timestamp
}

// objectBlock is an object record with its metadata: an applied object is
// kept whole by the fold.
type objectBlock struct {
	obj  schemas.ObjectRecord
	meta schemas.ObjectMeta
}

// fastRecord decodes data as an EventRecord, its detail left out (see
// DecodeRecord). The record aliases data, which
// must not be modified afterwards. ok is false when data holds anything the
// fast path does not handle; nothing is returned then.
func fastRecord(data []byte) (ev *schemas.EventRecord, ok bool) {
	// One string over the whole payload: every string field is a substring
	// of it, with no copy.
	d := recordDecoder{all: unsafe.String(unsafe.SliceData(data), len(data)), base: data}
	blk := new(eventBlock)
	if !d.event(&blk.ev, blk, 0, len(data)) {
		return nil, false
	}
	return &blk.ev, true
}

// recordDecoder reads fields from all (the payload as a string) and base
// (the same bytes), by offset.
type recordDecoder struct {
	all  string
	base []byte
}

// field reads the tag at i and, for a length-delimited field, its bounds.
// It returns the field number, wire type, for varints the value, for bytes
// the start and end of the value, and the offset after the field.
func (d *recordDecoder) field(i, end int) (num protowire.Number, typ protowire.Type, v uint64, start, stop, next int, ok bool) {
	num, typ, n := protowire.ConsumeTag(d.base[i:end])
	if n < 0 {
		return 0, 0, 0, 0, 0, 0, false
	}
	i += n
	switch typ {
	case protowire.VarintType:
		v, n = protowire.ConsumeVarint(d.base[i:end])
		if n < 0 {
			return 0, 0, 0, 0, 0, 0, false
		}
		return num, typ, v, 0, 0, i + n, true
	case protowire.BytesType:
		l, n := protowire.ConsumeVarint(d.base[i:end])
		if n < 0 || l > uint64(end-i-n) {
			return 0, 0, 0, 0, 0, 0, false
		}
		start = i + n
		stop = start + int(l)
		return num, typ, 0, start, stop, stop, true
	default:
		// Fixed-width and group fields: no field of these messages uses
		// them, so they are unknown fields; the slow path keeps them.
		return 0, 0, 0, 0, 0, 0, false
	}
}

// str is the string field start..stop, refused when not valid UTF-8 (as
// proto3 requires).
func (d *recordDecoder) str(start, stop int) (string, bool) {
	if !utf8.Valid(d.base[start:stop]) {
		return "", false
	}
	return d.all[start:stop], true
}

func (d *recordDecoder) event(ev *schemas.EventRecord, blk *eventBlock, i, end int) bool {
	for i < end {
		num, typ, v, start, stop, next, ok := d.field(i, end)
		if !ok {
			return false
		}
		switch {
		case num == 1 && typ == protowire.BytesType:
			ev.Id, ok = d.str(start, stop)
		case num == 2 && typ == protowire.VarintType:
			ev.Type = schemas.EventType(int32(v))
		case num == 3 && typ == protowire.BytesType:
			if ev.Key == nil {
				ev.Key = &blk.key
			}
			ok = d.key(ev.Key, start, stop)
		case num == 4 && typ == protowire.BytesType:
			if ev.Object == nil {
				ob := new(objectBlock)
				ev.Object = &ob.obj
				ok = d.object(ev.Object, ob, start, stop)
			} else {
				ok = d.object(ev.Object, nil, start, stop)
			}
		case num == 5 && typ == protowire.BytesType:
			ev.Actor, ok = d.str(start, stop)
		case num == 6 && typ == protowire.BytesType:
			if ev.Time == nil {
				ev.Time = &blk.time
			}
			ok = d.timestamp(ev.Time, start, stop)
		case num == 7 && typ == protowire.BytesType:
			ev.Cause, ok = d.str(start, stop)
		case num == 8 && typ == protowire.VarintType:
			ev.Sequence = v
		case num == 9 && typ == protowire.BytesType:
			// The detail (a scheduling decision, on every Bound event)
			// is left out of the record: no fold reads it, and decoding
			// it cost more than the rest of the event. It is checked as
			// proto.Unmarshal would check it, so the fast path accepts
			// exactly what the slow one does.
			ok = validStruct(d.base[start:stop], 0)
		default:
			return false
		}
		if !ok {
			return false
		}
		i = next
	}
	return true
}

func (d *recordDecoder) key(k *schemas.ObjectKey, i, end int) bool {
	for i < end {
		num, typ, _, start, stop, next, ok := d.field(i, end)
		if !ok || typ != protowire.BytesType {
			return false
		}
		switch num {
		case 1:
			k.Kind, ok = d.str(start, stop)
		case 2:
			k.Namespace, ok = d.str(start, stop)
		case 3:
			k.Name, ok = d.str(start, stop)
		default:
			return false
		}
		if !ok {
			return false
		}
		i = next
	}
	return true
}

// object decodes an ObjectRecord; ob, when set, is the block o lives in,
// whose metadata it uses.
func (d *recordDecoder) object(o *schemas.ObjectRecord, ob *objectBlock, i, end int) bool {
	for i < end {
		num, typ, _, start, stop, next, ok := d.field(i, end)
		if !ok || typ != protowire.BytesType {
			return false
		}
		switch num {
		case 1:
			o.ApiVersion, ok = d.str(start, stop)
		case 2:
			o.Kind, ok = d.str(start, stop)
		case 3:
			if o.Metadata == nil {
				if ob != nil {
					o.Metadata = &ob.meta
				} else {
					o.Metadata = new(schemas.ObjectMeta)
				}
			}
			ok = d.meta(o.Metadata, start, stop)
		case 4:
			// Capacity clipped: an append to the spec cannot write into
			// the payload after it.
			o.Spec = d.base[start:stop:stop]
		case 5:
			if o.Status == nil {
				o.Status = new(schemas.Status)
			}
			ok = d.status(o.Status, start, stop)
		default:
			return false
		}
		if !ok {
			return false
		}
		i = next
	}
	return true
}

func (d *recordDecoder) meta(m *schemas.ObjectMeta, i, end int) bool {
	for i < end {
		num, typ, v, start, stop, next, ok := d.field(i, end)
		if !ok {
			return false
		}
		switch {
		case typ == protowire.BytesType && num >= 1 && num <= 4:
			var s string
			if s, ok = d.str(start, stop); ok {
				switch num {
				case 1:
					m.Name = s
				case 2:
					m.Namespace = s
				case 3:
					m.Uid = s
				case 4:
					m.Group = s
				}
			}
		case num == 5 && typ == protowire.BytesType:
			if m.Labels == nil {
				m.Labels = map[string]string{}
			}
			ok = d.mapEntry(m.Labels, start, stop)
		case num == 6 && typ == protowire.BytesType:
			if m.Annotations == nil {
				m.Annotations = map[string]string{}
			}
			ok = d.mapEntry(m.Annotations, start, stop)
		case num == 7 && typ == protowire.BytesType:
			k := new(schemas.ObjectKey)
			m.DependsOn = append(m.DependsOn, k)
			ok = d.key(k, start, stop)
		case num == 8 && typ == protowire.BytesType:
			var s string
			if s, ok = d.str(start, stop); ok {
				m.Finalizers = append(m.Finalizers, s)
			}
		case num == 9 && typ == protowire.VarintType:
			m.Generation = int64(v)
		case num == 10 && typ == protowire.VarintType:
			m.ResourceVersion = v
		case num == 11 && typ == protowire.BytesType:
			if m.CreationTime == nil {
				m.CreationTime = new(timestamppb.Timestamp)
			}
			ok = d.timestamp(m.CreationTime, start, stop)
		case num == 12 && typ == protowire.BytesType:
			if m.DeletionTime == nil {
				m.DeletionTime = new(timestamppb.Timestamp)
			}
			ok = d.timestamp(m.DeletionTime, start, stop)
		default:
			return false
		}
		if !ok {
			return false
		}
		i = next
	}
	return true
}

// mapEntry decodes one entry of a map<string, string> into m.
func (d *recordDecoder) mapEntry(m map[string]string, i, end int) bool {
	var k, v string
	for i < end {
		num, typ, _, start, stop, next, ok := d.field(i, end)
		if !ok || typ != protowire.BytesType {
			return false
		}
		switch num {
		case 1:
			k, ok = d.str(start, stop)
		case 2:
			v, ok = d.str(start, stop)
		default:
			return false
		}
		if !ok {
			return false
		}
		i = next
	}
	m[k] = v
	return true
}

func (d *recordDecoder) status(s *schemas.Status, i, end int) bool {
	for i < end {
		num, typ, v, start, stop, next, ok := d.field(i, end)
		if !ok {
			return false
		}
		switch {
		case num == 1 && typ == protowire.BytesType:
			s.Goal, ok = d.str(start, stop)
		case num == 2 && typ == protowire.BytesType:
			s.Phase, ok = d.str(start, stop)
		case num == 3 && typ == protowire.BytesType:
			c := new(schemas.Condition)
			s.Conditions = append(s.Conditions, c)
			ok = d.condition(c, start, stop)
		case num == 4 && typ == protowire.VarintType:
			s.ObservedGeneration = int64(v)
		case num == 5 && typ == protowire.BytesType:
			s.Message, ok = d.str(start, stop)
		case num == 6 && typ == protowire.BytesType:
			if s.NextRunTime == nil {
				s.NextRunTime = new(timestamppb.Timestamp)
			}
			ok = d.timestamp(s.NextRunTime, start, stop)
		case num == 7 && typ == protowire.BytesType:
			if s.Details == nil {
				s.Details = new(structpb.Struct)
			}
			ok = d.structure(s.Details, start, stop)
		default:
			return false
		}
		if !ok {
			return false
		}
		i = next
	}
	return true
}

func (d *recordDecoder) condition(c *schemas.Condition, i, end int) bool {
	for i < end {
		num, typ, _, start, stop, next, ok := d.field(i, end)
		if !ok || typ != protowire.BytesType {
			return false
		}
		switch num {
		case 1:
			c.Type, ok = d.str(start, stop)
		case 2:
			c.Status, ok = d.str(start, stop)
		case 3:
			c.Reason, ok = d.str(start, stop)
		case 4:
			c.Message, ok = d.str(start, stop)
		case 5:
			if c.LastTransitionTime == nil {
				c.LastTransitionTime = new(timestamppb.Timestamp)
			}
			ok = d.timestamp(c.LastTransitionTime, start, stop)
		default:
			return false
		}
		if !ok {
			return false
		}
		i = next
	}
	return true
}

func (d *recordDecoder) timestamp(t *timestamppb.Timestamp, i, end int) bool {
	for i < end {
		num, typ, v, _, _, next, ok := d.field(i, end)
		if !ok || typ != protowire.VarintType {
			return false
		}
		switch num {
		case 1:
			t.Seconds = int64(v)
		case 2:
			t.Nanos = int32(v)
		default:
			return false
		}
		i = next
	}
	return true
}

// structure decodes a google.protobuf.Struct (a kind's own status, a
// scheduling decision) with proto.Unmarshal, merging into s as a repeated
// field would. Structs are rare in the log and never on the fold's path.
func (d *recordDecoder) structure(s *structpb.Struct, i, end int) bool {
	return proto.UnmarshalOptions{Merge: true}.Unmarshal(d.base[i:end], s) == nil
}

// maxStructDepth bounds the nesting validStruct follows, as proto.Unmarshal
// bounds recursion (its default limit is 10,000 levels).
const maxStructDepth = 10000

// validStruct reports whether b is a google.protobuf.Struct that
// proto.Unmarshal accepts: well-formed fields, strings of valid UTF-8,
// nested values and lists checked the same way. Fields it does not know
// (or with a wire type their number does not have) are unknown fields,
// which proto.Unmarshal keeps; it allocates nothing.
func validStruct(b []byte, depth int) bool {
	return validFields(b, depth, func(num protowire.Number, typ protowire.Type, v []byte) bool {
		if num != 1 || typ != protowire.BytesType {
			return true
		}
		// A map entry: string key = 1, Value value = 2.
		return validFields(v, depth+1, func(num protowire.Number, typ protowire.Type, v []byte) bool {
			switch {
			case num == 1 && typ == protowire.BytesType:
				return utf8.Valid(v)
			case num == 2 && typ == protowire.BytesType:
				return validValue(v, depth+2)
			}
			return true
		})
	})
}

// validValue is validStruct for a google.protobuf.Value.
func validValue(b []byte, depth int) bool {
	return validFields(b, depth, func(num protowire.Number, typ protowire.Type, v []byte) bool {
		if typ != protowire.BytesType {
			return true
		}
		switch num {
		case 3: // string_value
			return utf8.Valid(v)
		case 5: // struct_value
			return validStruct(v, depth+1)
		case 6: // list_value: repeated Value values = 1
			return validFields(v, depth+1, func(num protowire.Number, typ protowire.Type, v []byte) bool {
				return num != 1 || typ != protowire.BytesType || validValue(v, depth+2)
			})
		}
		return true
	})
}

// validFields walks the fields of one message in b, handing each
// length-delimited field's contents (nil for other wire types) to check.
func validFields(b []byte, depth int, check func(protowire.Number, protowire.Type, []byte) bool) bool {
	if depth > maxStructDepth {
		return false
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num > protowire.MaxValidNumber {
			// proto.Unmarshal refuses field numbers past 2^29-1, which
			// ConsumeTag reads.
			return false
		}
		b = b[n:]
		var v []byte
		if typ == protowire.BytesType {
			v, n = protowire.ConsumeBytes(b)
		} else {
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 || !check(num, typ, v) {
			return false
		}
		b = b[n:]
	}
	return true
}

// ValidStruct reports whether b is an encoded google.protobuf.Struct that
// proto.Unmarshal accepts (see validStruct), without decoding it.
func ValidStruct(b []byte) bool { return validStruct(b, 0) }
