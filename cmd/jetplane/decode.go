package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/schemas"
)

// maxRawEvent bounds what decode reads: an event holds at most one object
// of 1 MiB plus its envelope.
const maxRawEvent = 4 << 20

func newDecode() *cobra.Command {
	var multiline bool
	cmd := &cobra.Command{
		Use:   "decode",
		Short: "Turn a raw event of the log (protobuf) into JSON",
		Long: `Read one raw event as stored in the JP_EVENTS stream (the protobuf
message jetplane.v1.Event, as a NATS consumer receives it) on standard input
and print it as JSON. The sequence is not in the payload: it is the
message's stream sequence. schemas/proto/jetplane/v1/*.proto in the
repository describe the same message for any other protobuf decoder.`,
		Example: `  nats --nkey audit.creds --inbox-prefix _INBOX.sub.audit consumer next JP_EVENTS audit --raw | jetplane decode
  jetplane decode < event.bin`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			raw, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxRawEvent+1))
			if err != nil {
				return err
			}
			if len(raw) > maxRawEvent {
				return fmt.Errorf("decode: more than %d bytes on standard input; give one event", maxRawEvent)
			}
			var ev schemas.Event
			if err := proto.Unmarshal(raw, &ev); err != nil {
				return fmt.Errorf("decode: not a jetplane event (protobuf jetplane.v1.Event): %w", err)
			}
			opts := protojson.MarshalOptions{Multiline: multiline}
			out, err := opts.Marshal(&ev)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), string(out))
			return err
		},
	}
	cmd.Flags().BoolVar(&multiline, "pretty", false, "indent the JSON over several lines")
	return cmd
}
