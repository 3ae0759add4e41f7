package events

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// backupMagic starts every backup file.
const backupMagic = "jetplane-backup v1\n"

// BackupStreams are the streams a backup holds: the log and the chart
// store. Projection snapshots and membership are left out: both are
// rebuilt from the log.
var BackupStreams = []string{StreamName, "OBJ_" + ChartBucket}

// streamHeader precedes each stream's snapshot in a backup.
type streamHeader struct {
	Name   string          `json:"name"`
	Config json.RawMessage `json:"config"`
	State  json.RawMessage `json:"state"`
	Bytes  int64           `json:"bytes"`
	// Chain is the chain head over the stream's events up to the last
	// one in the backup (the log only; absent when the server's files
	// could not be read, as with an outside NATS).
	Chain *ChainHead `json:"chain,omitempty"`
}

// ChainHead is the hash chain's head after sequence Seq (package
// events/chain), as a backup carries it.
type ChainHead struct {
	Seq  uint64 `json:"seq"`
	Head string `json:"head"`
}

// HeadAt returns the chain head of the log after seq, for a backup to
// carry (nil when it cannot be known).
type HeadAt func(seq uint64) (*ChainHead, error)

// Backup writes a consistent snapshot of the log and the chart store
// (JetStream's own stream snapshots, consumers included, so reconcilers
// resume where they were) to w, while jetplane keeps running. Streams that
// do not exist yet are skipped. Restore reads it back.
func Backup(ctx context.Context, nc *nats.Conn, w io.Writer) error {
	return BackupWithHead(ctx, nc, w, nil)
}

// BackupWithHead is Backup whose log carries its chain head, from headAt
// (nil: none), so that a restore can check every event it restores.
func BackupWithHead(ctx context.Context, nc *nats.Conn, w io.Writer, headAt HeadAt) error {
	bw := bufio.NewWriter(w)
	if _, err := bw.WriteString(backupMagic); err != nil {
		return err
	}
	for _, name := range BackupStreams {
		var h HeadAt
		if name == StreamName {
			h = headAt
		}
		if err := backupStream(ctx, nc, name, bw, h); err != nil {
			return fmt.Errorf("backup %s: %w", name, err)
		}
	}
	return bw.Flush()
}

func backupStream(ctx context.Context, nc *nats.Conn, name string, w *bufio.Writer, headAt HeadAt) error {
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	req, _ := json.Marshal(map[string]any{"deliver_subject": inbox, "jsck": true})
	resp, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.SNAPSHOT."+name, req)
	if err != nil {
		return err
	}
	var sr struct {
		Config json.RawMessage `json:"config"`
		State  json.RawMessage `json:"state"`
		Error  *apiError       `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &sr); err != nil {
		return err
	}
	if sr.Error != nil {
		if sr.Error.Code == 404 {
			return nil // not created yet: nothing to keep
		}
		return sr.Error.err()
	}
	// The snapshot arrives in chunks, each acknowledged to let the next
	// ones come; it is spooled to learn its length before writing.
	var chunks [][]byte
	var total int64
	for {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return err
		}
		if len(msg.Data) == 0 && msg.Header != nil {
			if st := msg.Header.Get("Status"); st != "" && st != "204" {
				return fmt.Errorf("snapshot ended with %s %s", st, msg.Header.Get("Description"))
			}
			break
		}
		if len(msg.Data) == 0 {
			break
		}
		chunks = append(chunks, msg.Data)
		total += int64(len(msg.Data))
		if msg.Reply != "" {
			if err := nc.Publish(msg.Reply, nil); err != nil {
				return err
			}
		}
	}
	sh := streamHeader{Name: name, Config: sr.Config, State: sr.State, Bytes: total}
	if headAt != nil {
		var st struct {
			LastSeq uint64 `json:"last_seq"`
		}
		if err := json.Unmarshal(sr.State, &st); err != nil {
			return fmt.Errorf("snapshot state: %w", err)
		}
		if st.LastSeq > 0 {
			if sh.Chain, err = headAt(st.LastSeq); err != nil {
				return fmt.Errorf("chain head at %d: %w", st.LastSeq, err)
			}
		}
	}
	hdr, _ := json.Marshal(sh)
	if err := binary.Write(w, binary.BigEndian, uint32(len(hdr))); err != nil {
		return err
	}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	for _, c := range chunks {
		if _, err := w.Write(c); err != nil {
			return err
		}
	}
	return nil
}

// ErrStreamExists means a restore found a stream already there: restore
// into a fresh NATS store (or account) only, so nothing is overwritten.
var ErrStreamExists = errors.New("stream already exists")

// Restore reads a backup written by Backup into nc's JetStream, which must
// not hold its streams yet (ErrStreamExists). The streams come back with
// their configuration, sequences and consumers, so jetplane started on
// them has the same state and history.
func Restore(ctx context.Context, nc *nats.Conn, r io.Reader) error {
	_, err := RestoreWithHead(ctx, nc, r)
	return err
}

// RestoreWithHead is Restore that also returns the chain head the
// backup's log carries (nil for a backup without one), for the caller to
// check the restored events against.
func RestoreWithHead(ctx context.Context, nc *nats.Conn, r io.Reader) (*ChainHead, error) {
	br := bufio.NewReader(r)
	magic := make([]byte, len(backupMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != backupMagic {
		return nil, errors.New("restore: not a jetplane backup (it must start with \"jetplane-backup v1\")")
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	var head *ChainHead
	for {
		var n uint32
		if err := binary.Read(br, binary.BigEndian, &n); err == io.EOF {
			return head, nil
		} else if err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
		if n > 1<<20 {
			return nil, fmt.Errorf("restore: stream header of %d bytes: the backup is damaged", n)
		}
		raw := make([]byte, n)
		if _, err := io.ReadFull(br, raw); err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
		var h streamHeader
		if err := json.Unmarshal(raw, &h); err != nil {
			return nil, fmt.Errorf("restore: stream header: %w", err)
		}
		if _, err := js.Stream(ctx, h.Name); err == nil {
			return nil, fmt.Errorf("restore %s: %w; restore into an empty data directory or NATS account", h.Name, ErrStreamExists)
		}
		if err := restoreStream(ctx, nc, h, io.LimitReader(br, h.Bytes)); err != nil {
			return nil, fmt.Errorf("restore %s: %w", h.Name, err)
		}
		if h.Name == StreamName && h.Chain != nil {
			head = h.Chain
		}
	}
}

// BackupHead reads the chain head a backup's log carries (nil when it
// carries none) from the backup's first bytes.
func BackupHead(r io.Reader) (*ChainHead, error) {
	br := bufio.NewReader(r)
	magic := make([]byte, len(backupMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != backupMagic {
		return nil, errors.New("not a jetplane backup")
	}
	var n uint32
	if err := binary.Read(br, binary.BigEndian, &n); err != nil || n > 1<<20 {
		return nil, errors.New("the backup holds no stream")
	}
	raw := make([]byte, n)
	if _, err := io.ReadFull(br, raw); err != nil {
		return nil, err
	}
	var h streamHeader
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, err
	}
	if h.Name != StreamName {
		return nil, nil
	}
	return h.Chain, nil
}

func restoreStream(ctx context.Context, nc *nats.Conn, h streamHeader, data io.Reader) error {
	req, _ := json.Marshal(map[string]json.RawMessage{"config": h.Config, "state": h.State})
	resp, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.RESTORE."+h.Name, req)
	if err != nil {
		return err
	}
	var rr struct {
		DeliverSubject string    `json:"deliver_subject"`
		Error          *apiError `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &rr); err != nil {
		return err
	}
	if rr.Error != nil {
		return rr.Error.err()
	}
	chunk := make([]byte, 128<<10)
	for {
		n, err := io.ReadFull(data, chunk)
		if n > 0 {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, rerr := nc.RequestWithContext(cctx, rr.DeliverSubject, chunk[:n])
			cancel()
			if rerr != nil {
				return rerr
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return err
		}
	}
	// An empty message ends the restore; the answer says how it went.
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	done, err := nc.RequestWithContext(cctx, rr.DeliverSubject, nil)
	if err != nil {
		return err
	}
	var fin struct {
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(done.Data, &fin); err != nil && !strings.HasPrefix(string(done.Data), "{") {
		return fmt.Errorf("restore: unexpected answer %q", done.Data)
	}
	if fin.Error != nil {
		return fin.Error.err()
	}
	return nil
}
