package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/printer"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// outputFormat validates -o.
func outputFormat(o string, allowed ...string) error {
	var named []string
	for _, a := range allowed {
		if o == a {
			return nil
		}
		if a != "" {
			named = append(named, a)
		}
	}
	return usage(fmt.Errorf("-o: %q is not one of %s", o, strings.Join(named, ", ")))
}

// writeDocs prints JSON documents as JSON (one per line for a stream, an
// indented list otherwise) or YAML (separated by ---).
func writeDocs(w io.Writer, format string, docs []json.RawMessage, asList bool) error {
	switch format {
	case "json":
		if asList {
			out, err := json.MarshalIndent(map[string]any{"items": docs}, "", "  ")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(w, "%s\n", out)
			return err
		}
		for _, d := range docs {
			var buf bytes.Buffer
			if err := json.Indent(&buf, d, "", "  "); err != nil {
				return err
			}
			if _, err := fmt.Fprintf(w, "%s\n", buf.Bytes()); err != nil {
				return err
			}
		}
		return nil
	case "yaml":
		for i, d := range docs {
			y, err := printer.ToYAML(d)
			if err != nil {
				return err
			}
			if i > 0 {
				if _, err := io.WriteString(w, "---\n"); err != nil {
					return err
				}
			}
			if _, err := w.Write(y); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown output format %q", format)
}

// kindOf is the kind with its API group, as keys name it.
func kindOf(o *schemas.Object) string { return projections.ObjectKey(o).Kind }

// eventType turns EVENT_TYPE_DELETE_REQUESTED into DeleteRequested.
func eventType(t schemas.EventType) string {
	s := strings.TrimPrefix(t.String(), "EVENT_TYPE_")
	var b strings.Builder
	for _, part := range strings.Split(strings.ToLower(s), "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

func generation(ev *schemas.Event) string {
	if g := ev.GetObject().GetMetadata().GetGeneration(); g > 0 {
		return fmt.Sprint(g)
	}
	return "-"
}

// printList prints listed objects: JSON or YAML documents, or a table
// ("No objects found." on stderr when there are none).
func printList(cmd *cobra.Command, output string, items []json.RawMessage) error {
	w := cmd.OutOrStdout()
	if output == "json" || output == "yaml" {
		return writeDocs(w, output, items, output == "json")
	}
	if len(items) == 0 {
		fmt.Fprintln(cmd.ErrOrStderr(), "No objects found.")
		return nil
	}
	its, err := printer.Decode(items, api.DecodeObject)
	if err != nil {
		return err
	}
	return printer.Print(w, its, false, printer.Options{Format: output})
}
