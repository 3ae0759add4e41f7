package events

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StreamName is the name of the one stream that holds every event.
const StreamName = "JP_EVENTS"

// Config describes the log's stream. The zero value is usable: 16
// partitions, one replica, unlimited retention, a two-minute dedupe window.
type Config struct {
	// Partitions splits the key space; fixed when the stream is created.
	// An existing stream keeps its own count (see Log.Partitions).
	Partitions int
	// Replicas is the stream's replication factor (1, or 3 on a cluster).
	Replicas int
	// MaxAge drops events older than this; 0 keeps them forever.
	MaxAge time.Duration
	// MaxBytes caps the stream's size, dropping the oldest events; 0 is unlimited.
	MaxBytes int64
	// DuplicateWindow is how long an event id is remembered for dedupe.
	DuplicateWindow time.Duration
	// RequireAppendOnly refuses an existing stream that allows deleting or
	// purging events (ErrNotAppendOnly) instead of turning the denials
	// on: on an outside NATS, such a stream may already have lost events.
	RequireAppendOnly bool
	// StoreError, when set, says why the log's server cannot write its
	// store (nil when it can): appends fail at once while it says so, and
	// an append that fails is asked about it (fresh), so that the error
	// names the cause (a full disk) rather than the server's answer (an
	// incomplete batch, or none at all). The embedded server's
	// StoreError and StoreErrorNow.
	StoreError func(fresh bool) error
	// AtomicGroups writes each group of AppendEach as one atomic batch:
	// one fsync for the group on a server that fsyncs every write
	// (--sync=always). Otherwise groups are pipelined (decision 0069).
	AtomicGroups bool
	// MinAtomicGroup is the fewest entries an atomic group holds; a
	// smaller group is pipelined, each entry fsynced on its own. On a
	// single-replica file stream the server stages each atomic batch in a
	// file store it creates on disk, which costs about as much CPU as
	// twenty entries written one by one (decision 0086); on a replicated
	// stream it stages in memory. 0: 16 on a single replica, 2 otherwise.
	MinAtomicGroup int
	// Sync, when set, makes durable what the log's server acknowledged
	// so far on a stream (the embedded server's SyncStream; every block,
	// not only the newest, when a write may have changed older ones):
	// every append then returns only after a call of Sync that began
	// after its acknowledgement, and concurrent appends share calls
	// (decision 0083); the data keys, blobs and images the log opens are
	// synced after each write too. For a server that does not fsync every
	// write itself; with Sync, AppendEach pipelines every caller's entries
	// at once and AtomicGroups is ignored.
	Sync func(stream string, every bool) error
}

func (c Config) withDefaults() Config {
	if c.Partitions == 0 {
		c.Partitions = 16
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = 2 * time.Minute
	}
	if c.MinAtomicGroup == 0 {
		c.MinAtomicGroup = 2
		if c.Replicas == 1 {
			c.MinAtomicGroup = 16
		}
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Partitions < 1 || c.Partitions > MaxPartitions:
		return fmt.Errorf("partitions: %d is out of range; use 1 to %d", c.Partitions, MaxPartitions)
	case c.Replicas != 1 && c.Replicas != 3 && c.Replicas != 5:
		return fmt.Errorf("replicas: %d is not supported; use 1, 3 or 5", c.Replicas)
	case c.MaxAge < 0 || c.MaxBytes < 0:
		return errors.New("retention: max age and max bytes must not be negative; 0 means unlimited")
	case c.DuplicateWindow < time.Second:
		return fmt.Errorf("duplicate window: %s is too short; use at least 1s", c.DuplicateWindow)
	}
	return nil
}

// Log is the event log. It is safe for concurrent use.
type Log struct {
	nc         *nats.Conn
	js         jetstream.JetStream
	stream     jetstream.Stream
	partitions int
	storeErr   func(fresh bool) error
	group      *grouper
	// sync, when the log does its own fsyncs, is shared by every Log of
	// one Open (OnConn).
	sync *durability
	// syncFn is Config.Sync.
	syncFn func(stream string, every bool) error
	// replies receives the acknowledgements of AppendAsync's appends.
	replies replies
}

// Open creates the stream or brings an existing one's settings up to date,
// idempotently, and returns the log.
func Open(ctx context.Context, nc *nats.Conn, cfg Config) (*Log, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("events config: %w", err)
	}
	// Replicated API calls wait on a quorum; on a loaded cluster the
	// client's default 5 s is too short.
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(15*time.Second))
	if err != nil {
		return nil, err
	}
	partitions := cfg.Partitions
	if s, err := js.Stream(ctx, StreamName); err == nil {
		// The partition count is part of every stored subject; changing it
		// would split keys across partitions, so an existing stream keeps it.
		if p := partitionsOf(s.CachedInfo().Config); p > 0 {
			partitions = p
		}
		if c := s.CachedInfo().Config; cfg.RequireAppendOnly && (!c.DenyDelete || !c.DenyPurge) {
			return nil, fmt.Errorf("stream %s: deny_delete=%t deny_purge=%t: %w; check it lost nothing, then set both (nats stream edit) and start again",
				StreamName, c.DenyDelete, c.DenyPurge, ErrNotAppendOnly)
		}
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("look up stream %s: %w", StreamName, err)
	}
	sc := streamConfig(cfg, partitions)
	s, err := js.CreateOrUpdateStream(ctx, sc)
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", StreamName, err)
	}
	l := &Log{nc: nc, js: js, stream: s, partitions: partitions, storeErr: cfg.StoreError, group: &grouper{atomic: cfg.AtomicGroups, minAtomic: cfg.MinAtomicGroup}}
	if cfg.Sync != nil {
		l.syncFn = cfg.Sync
		l.sync = &durability{fn: func() error { return cfg.Sync(StreamName, false) }}
		l.group.atomic = false
	}
	return l, nil
}

func streamConfig(cfg Config, partitions int) jetstream.StreamConfig {
	maxBytes := cfg.MaxBytes
	if maxBytes == 0 {
		maxBytes = -1
	}
	return jetstream.StreamConfig{
		Name:        StreamName,
		Description: "jetplane event log",
		Subjects:    []string{InputPrefix + ".*.*.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{
			Source:      InputPrefix + ".*.*.*",
			Destination: fmt.Sprintf("%s.{{partition(%d,1,2,3)}}.{{wildcard(1)}}.{{wildcard(2)}}.{{wildcard(3)}}", StoredPrefix, partitions),
		},
		Retention:          jetstream.LimitsPolicy,
		Storage:            jetstream.FileStorage,
		Replicas:           cfg.Replicas,
		MaxAge:             cfg.MaxAge,
		MaxBytes:           maxBytes,
		MaxMsgs:            -1,
		MaxMsgSize:         MaxEventBytes,
		Duplicates:         cfg.DuplicateWindow,
		Discard:            jetstream.DiscardOld,
		DenyDelete:         true,
		DenyPurge:          true,
		AllowDirect:        true,
		AllowAtomicPublish: true,
	}
}

var partitionRE = regexp.MustCompile(`partition\((\d+),`)

func partitionsOf(c jetstream.StreamConfig) int {
	if c.SubjectTransform == nil {
		return 0
	}
	m := partitionRE.FindStringSubmatch(c.SubjectTransform.Destination)
	if m == nil {
		return 0
	}
	p, _ := strconv.Atoi(m[1])
	return p
}

// OnConn is the same log reached through another connection, for work
// that must not queue behind this connection's traffic: membership
// heartbeats and the lease (decision 0041), which API reads of large
// events would otherwise delay past the lease's expiry.
func (l *Log) OnConn(ctx context.Context, nc *nats.Conn) (*Log, error) {
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(15*time.Second))
	if err != nil {
		return nil, err
	}
	s, err := js.Stream(ctx, StreamName)
	if err != nil {
		return nil, fmt.Errorf("look up stream %s: %w", StreamName, err)
	}
	return &Log{nc: nc, js: js, stream: s, partitions: l.partitions, storeErr: l.storeErr, group: &grouper{atomic: l.group.atomic, minAtomic: l.group.minAtomic}, sync: l.sync, syncFn: l.syncFn}, nil
}

// Partitions is the number of partitions of the key space.
func (l *Log) Partitions() int { return l.partitions }

// Conn is the NATS connection the log uses.
func (l *Log) Conn() *nats.Conn { return l.nc }

// LastSequence is the sequence of the newest event, 0 for an empty log.
func (l *Log) LastSequence(ctx context.Context) (uint64, error) {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream info: %w", err)
	}
	return info.State.LastSeq, nil
}

// Count is the number of events in the log.
func (l *Log) Count(ctx context.Context) (uint64, error) {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream info: %w", err)
	}
	return info.State.Msgs, nil
}
