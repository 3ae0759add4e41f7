package reconcilers

import (
	"errors"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// delivered is a delivery with what the runtime needs of its event: the
// event's id (the cause of the run's status) and time (for the latency
// metric).
type delivered struct {
	events.Delivery
	id string
	at time.Time
}

// eventHead is an event's top-level fields a trigger needs.
type eventHead struct {
	id    string
	typ   schemas.EventType
	actor []byte // aliases the payload; compare, do not keep
	at    time.Time
}

// Field numbers of schemas.Event (and google.protobuf.Timestamp) that
// scanHead reads.
const (
	fieldEventID    = 1
	fieldEventType  = 2
	fieldEventActor = 5
	fieldEventTime  = 6
	fieldTSSeconds  = 1
	fieldTSNanos    = 2
)

var errBadEvent = errors.New("malformed event")

// scanHead reads an encoded event's id, type, actor and time, skipping
// the rest (the object, most of the bytes) without decoding it. The
// runtime takes a trigger's key from the stored subject, so a delivery
// costs a scan, not a decode (the projection decodes every event anyway).
func scanHead(b []byte) (eventHead, error) {
	var h eventHead
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return h, errBadEvent
		}
		b = b[n:]
		switch {
		case num == fieldEventID && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return h, errBadEvent
			}
			h.id, b = string(v), b[n:]
		case num == fieldEventActor && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return h, errBadEvent
			}
			h.actor, b = v, b[n:]
		case num == fieldEventType && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return h, errBadEvent
			}
			h.typ, b = schemas.EventType(v), b[n:]
		case num == fieldEventTime && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return h, errBadEvent
			}
			b = b[n:]
			at, err := scanTimestamp(v)
			if err != nil {
				return h, err
			}
			h.at = at
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return h, errBadEvent
			}
			b = b[n:]
		}
	}
	return h, nil
}

func scanTimestamp(b []byte) (time.Time, error) {
	var secs, nanos int64
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return time.Time{}, errBadEvent
		}
		b = b[n:]
		if typ != protowire.VarintType {
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return time.Time{}, errBadEvent
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return time.Time{}, errBadEvent
		}
		b = b[n:]
		switch num {
		case fieldTSSeconds:
			secs = int64(v)
		case fieldTSNanos:
			nanos = int64(int32(v))
		}
	}
	return time.Unix(secs, nanos), nil
}

// keyOfSubject is a stored subject's partition and key.
func keyOfSubject(subject string) (int, projections.Key, error) {
	p, k, err := events.ParseSubject(subject)
	if err != nil {
		return 0, projections.Key{}, err
	}
	return p, projections.Key{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name}, nil
}
