package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
)

// SubscribeOptions are the filters and start of Client.Subscribe.
type SubscribeOptions struct {
	// From is now (""), a log sequence (the changes after it) or an RFC
	// 3339 time.
	From       string
	Kinds      []string
	Namespaces []string
	Selector   string
	Types      []string
	// Follow keeps the stream open for new changes.
	Follow bool
}

// SubscribeEvent is one line of GET /v1/subscribe: a CloudEvent in
// structured JSON, kept as sent, and its log sequence.
type SubscribeEvent struct {
	Raw      json.RawMessage
	Sequence uint64
}

// Subscribe streams CloudEvents from GET /v1/subscribe to fn. A stream that
// breaks is opened again after the last sequence fn received, so nothing is
// missed and nothing is repeated.
func (c *Client) Subscribe(ctx context.Context, opts SubscribeOptions, fn func(SubscribeEvent) error) error {
	from := opts.From
	return c.resume(ctx, opts.Follow, func() error { return c.subscribeOnce(ctx, opts, &from, fn) })
}

func (c *Client) subscribeOnce(ctx context.Context, opts SubscribeOptions, from *string, fn func(SubscribeEvent) error) error {
	v := url.Values{}
	if *from != "" {
		v.Set("from", *from)
	}
	set := func(name string, list []string) {
		if len(list) > 0 {
			v.Set(name, strings.Join(list, ","))
		}
	}
	set("kinds", opts.Kinds)
	set("namespaces", opts.Namespaces)
	set("types", opts.Types)
	if opts.Selector != "" {
		v.Set("selector", opts.Selector)
	}
	if !opts.Follow {
		v.Set("follow", "false")
	}
	resp, err := c.openStream(ctx, "/v1/subscribe", v, "application/x-ndjson")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if start := resp.Header.Get(FromHeader); start != "" {
		// The server resolved now or a time to a sequence: a reconnect
		// goes on from there, not from a later now.
		*from = start
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var head struct {
			Sequence string `json:"sequence"`
		}
		if err := json.Unmarshal(line, &head); err != nil {
			return fmt.Errorf("subscribe: bad event: %w", err)
		}
		seq, _ := strconv.ParseUint(head.Sequence, 10, 64)
		if err := fn(SubscribeEvent{Raw: append(json.RawMessage(nil), line...), Sequence: seq}); err != nil {
			return errStopWatch
		}
		*from = head.Sequence
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if opts.Follow {
		return io.EOF
	}
	return nil
}
