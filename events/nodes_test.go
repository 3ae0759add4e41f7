package events_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
)

func nodeStore(t *testing.T) (*events.NodeStore, *events.Log) {
	t.Helper()
	l := testenv.Log(t, events.Config{})
	s, err := l.NodeStore(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s, l
}

var module = append([]byte{0, 'a', 's', 'm', 1, 0, 0, 0}, bytes.Repeat([]byte{7}, 300<<10)...)

func TestImagesAreStoredOncePerDigest(t *testing.T) {
	s, _ := nodeStore(t)
	ctx := context.Background()
	im := s.Images()
	a, err := im.Push(ctx, "hello:v1", bytes.NewReader(module), 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := im.Push(ctx, "hello:latest", bytes.NewReader(module), 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != b.Digest || !strings.HasPrefix(a.Digest, "sha256:") || a.Size != uint64(len(module)) {
		t.Fatalf("pushes %+v and %+v", a, b)
	}
	list, err := im.List(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list = %+v, %v", list, err)
	}
	d, _, err := im.Resolve(ctx, "hello@"+a.Digest)
	if err != nil || d != a.Digest {
		t.Fatalf("resolve by digest: %s %v", d, err)
	}
	var got bytes.Buffer
	if err := im.Fetch(ctx, a.Digest, &got, 1<<30); err != nil || !bytes.Equal(got.Bytes(), module) {
		t.Fatalf("fetch: %v (%d bytes)", err, got.Len())
	}
	// In use: refused, nothing removed.
	err = im.Remove(ctx, "hello:v1", func(ref, digest string) []string {
		if ref == "hello:v1" {
			return []string{"default/a"}
		}
		return nil
	})
	if !errors.Is(err, events.ErrImageInUse) || !strings.Contains(err.Error(), "image in use by pod default/a") {
		t.Fatalf("remove in use: %v", err)
	}
	if err := im.Remove(ctx, "hello:v1", nil); err != nil {
		t.Fatal(err)
	}
	// The module stays while another tag names it.
	if _, _, err := im.Resolve(ctx, "hello:latest"); err != nil {
		t.Fatal(err)
	}
	if err := im.Remove(ctx, "hello:latest", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := im.Resolve(ctx, "hello@"+a.Digest); !errors.Is(err, events.ErrNotFound) {
		t.Fatalf("the module outlived its last tag: %v", err)
	}
}

func TestImagesRefuseBadInput(t *testing.T) {
	s, _ := nodeStore(t)
	ctx := context.Background()
	tests := []struct {
		name, ref string
		data      []byte
		max       int64
		want      string
	}{
		{"empty", "a:v1", nil, 0, "0 bytes"},
		{"not wasm", "a:v1", []byte("#!/bin/sh\necho hi\n"), 0, "not a WebAssembly module"},
		{"over the limit", "a:v1", module, 1024, "over the 1024-byte limit"},
		{"no tag", "a", module, 0, "NAME:TAG"},
		{"digest", "a@sha256:00", module, 0, "64 hex digits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Images().Push(ctx, tt.ref, bytes.NewReader(tt.data), tt.max)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
	if list, _ := s.Images().List(ctx); len(list) != 0 {
		t.Fatalf("bad pushes stored %+v", list)
	}
}

// Logs are stored under the node that wrote them and read for one node:
// another node's output under the same pod's name is not that pod's log.
func TestLogsAreReadForTheBoundNode(t *testing.T) {
	s, l := nodeStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := events.OpenNode(ctx, l.Conn(), "n1.example")
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range []string{"one\n", "two\n", "three\n"} {
		if err := nc.PublishLog("ns", "p", "main", "stdout", i/2, []byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.PublishLog("ns", "p", "side", "stderr", 0, []byte("other\n")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var got []string
		err := s.ReadLogs(ctx, events.LogQuery{Node: "n1.example", Namespace: "ns", Pod: "p", Container: "main"}, func(ll events.LogLine) error {
			got = append(got, ll.Container+"/"+ll.Stream+"/"+string(rune('0'+ll.Restart))+"/"+strings.TrimSpace(string(ll.Data)))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, ",") == "main/stdout/0/one,main/stdout/0/two,main/stdout/1/three" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("logs = %v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var all int
	if err := s.ReadLogs(ctx, events.LogQuery{Node: "n1.example", Namespace: "ns", Pod: "p"}, func(events.LogLine) error { all++; return nil }); err != nil || all != 4 {
		t.Fatalf("all containers: %d lines, %v", all, err)
	}
	var none int
	if err := s.ReadLogs(ctx, events.LogQuery{Node: "n1.example", Namespace: "ns", Pod: "absent"}, func(events.LogLine) error { none++; return nil }); err != nil || none != 0 {
		t.Fatalf("absent pod: %d lines, %v", none, err)
	}
	if err := s.ReadLogs(ctx, events.LogQuery{Node: "n2", Namespace: "ns", Pod: "p"}, func(events.LogLine) error { none++; return nil }); err != nil || none != 0 {
		t.Fatalf("another node: %d lines, %v", none, err)
	}
	newest, err := s.NewestLog(ctx, events.LogQuery{Node: "n1.example", Namespace: "ns", Pod: "p"})
	if err != nil || len(newest) != 2 || newest[0].Restart != 1 || newest[1].Container != "side" {
		t.Fatalf("newest: %+v, %v", newest, err)
	}
	// The last two chunks, found from the end.
	var last []string
	if err := s.ReadLogs(ctx, events.LogQuery{Node: "n1.example", Namespace: "ns", Pod: "p", Last: 2}, func(ll events.LogLine) error {
		last = append(last, strings.TrimSpace(string(ll.Data)))
		return nil
	}); err != nil || strings.Join(last, ",") != "three,other" {
		t.Fatalf("last 2: %v, %v", last, err)
	}
}

// CreateWork writes only where a pod never had a work item: it neither
// overwrites one nor brings back one since deleted, so a handover that
// arrives late cannot undo what the pod's run wrote.
func TestCreateWorkOnlyCreates(t *testing.T) {
	s, _ := nodeStore(t)
	ctx := context.Background()
	if ok, err := s.CreateWork(ctx, "n1", "ns", "fresh", []byte("a")); err != nil || !ok {
		t.Fatalf("a new pod's item: wrote %v, %v; want written", ok, err)
	}
	if ok, err := s.CreateWork(ctx, "n1", "ns", "fresh", []byte("b")); err != nil || ok {
		t.Fatalf("over an item: wrote %v, %v; want nothing written, no error", ok, err)
	}
	if _, err := s.PutWork(ctx, "n1", "ns", "gone", []byte("run")); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteWork(ctx, "n1", "ns", "gone"); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.CreateWork(ctx, "n1", "ns", "gone", []byte("late")); err != nil || ok {
		t.Fatalf("over a deleted item: wrote %v, %v; want nothing written, no error", ok, err)
	}
	// A pod finalized before its handover: deleting leaves a marker too.
	if err := s.DeleteWork(ctx, "n1", "ns", "never"); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.CreateWork(ctx, "n1", "ns", "never", []byte("late")); err != nil || ok {
		t.Fatalf("after a deletion of nothing: wrote %v, %v; want nothing written", ok, err)
	}
	// The first item stayed: putting it again writes nothing.
	if wrote, err := s.PutWork(ctx, "n1", "ns", "fresh", []byte("a")); err != nil || wrote {
		t.Fatalf("the created item changed: put wrote %v, %v", wrote, err)
	}
}
