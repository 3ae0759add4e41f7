package manifest

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// svcDoc is a valid document for building invalid ones around it.
const svcDoc = "apiVersion: v1\nkind: Service\nmetadata:\n  name: ok\n"

// withMetadata returns a Service document with extra lines under metadata
// (indented two spaces by the caller) after name: a.
func withMetadata(lines string) string {
	return "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n" + lines
}

func withSpec(lines string) string {
	return "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: a\nspec:\n" + lines
}

// billionLaughs is the classic alias bomb: nine levels of nine aliases,
// 9^9 (387 million) nodes when expanded, a few hundred bytes when not.
func billionLaughs() string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Service\nmetadata:\n  name: a\nspec:\n  l0: &l0 [lol]\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "  l%d: &l%d [", i, i)
		for j := 0; j < 9; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*l%d", i-1)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// mergeChain makes each map merge the previous one: few aliases, but
// quadratic copying if merged entries were not counted.
func mergeChain() string {
	var b strings.Builder
	b.WriteString(svcDoc + "spec:\n  m0: &m0 {a: 1}\n")
	for i := 1; i < 2000; i++ {
		fmt.Fprintf(&b, "  m%d: &m%d {<<: *m%d, b%d: 1}\n", i, i, i-1, i)
	}
	return b.String()
}

func deepSpec(levels int) string {
	return withSpec("  x: " + strings.Repeat("[", levels) + strings.Repeat("]", levels) + "\n")
}

// oversizeInvalid is just over MaxObjectBytes and not valid YAML either: the
// error must be about the size, which proves nothing was parsed.
func oversizeInvalid() string {
	doc := "apiVersion: v1\nkind: Service\nmetadata: {name: a\n  bad: [unclosed\n\t\ttab: \"unclosed\n"
	doc += strings.Repeat("#", MaxObjectBytes-len(doc)) + "\n" // one byte over
	return svcDoc + "---\n" + doc + "---\n" + svcYAML("after")
}

func tooManyDocuments() string {
	return strings.Repeat(svcDoc+"---\n", 1) + strings.Repeat("---\n", MaxDocuments)
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		wantErr []string // every substring must appear in the error
	}{
		// Broken YAML.
		{name: "bad indentation", input: "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n   namespace: b\n",
			wantErr: []string{"document 1", "invalid YAML: line 5", "mapping values are not allowed"}},
		{name: "unclosed quote", input: svcDoc + "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: \"a\n",
			wantErr: []string{"document 2", "invalid YAML", "unexpected end of stream"}},
		{name: "tab indentation", input: "apiVersion: v1\nkind: Service\nmetadata:\n\tname: a\n",
			wantErr: []string{"document 1", "invalid YAML: line 4", "tab is used for indentation"}},
		{name: "second document started without a separator line", input: svcDoc + "--- # another\n" + svcDoc,
			wantErr: []string{"document 1", "line 5 starts a second document", "only ---"}},
		{name: "top-level block sequence", input: "- " + strings.ReplaceAll(svcDoc, "\n", "\n  "),
			wantErr: []string{"document 1", "expected a mapping with apiVersion, kind and metadata, got a list"}},

		// Wrong types.
		{name: "name as number", input: "apiVersion: v1\nkind: Service\nmetadata:\n  name: 123\n",
			wantErr: []string{"document 1", "metadata.name: must be a string, got a number (123); quote it"}},
		{name: "labels as list", input: withMetadata("  labels: [a, b]\n"),
			wantErr: []string{"document 1", "metadata.labels: must be a mapping of strings to strings, got a list"}},
		{name: "label value as map", input: withMetadata("  labels:\n    app: {x: 1}\n"),
			wantErr: []string{"document 1", "metadata.labels.app: must be a string, got a mapping"}},
		{name: "label value as number", input: withMetadata("  labels:\n    version: 2\n"),
			wantErr: []string{"document 1", "metadata.labels.version: must be a string, got a number (2); quote it"}},
		{name: "spec as string", input: svcDoc + "spec: replicas=3\n",
			wantErr: []string{"document 1", `spec: must be a mapping, got a string ("replicas=3")`}},
		{name: "metadata as list", input: "apiVersion: v1\nkind: Service\nmetadata: [name, a]\n",
			wantErr: []string{"document 1", "metadata: must be a mapping, got a list"}},
		{name: "dependsOn as map", input: withMetadata("  dependsOn: {kind: Service, name: b}\n"),
			wantErr: []string{"document 1", "metadata.dependsOn: must be a list of {kind, namespace, name} mappings, got a mapping"}},
		{name: "finalizers as string", input: withMetadata("  finalizers: jetplane.io/x\n"),
			wantErr: []string{"document 1", "metadata.finalizers: must be a list of strings, got a string"}},
		{name: "JSON array element that is not an object", input: `[{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}}, 42]`,
			wantErr: []string{"document 2", "expected a mapping with apiVersion, kind and metadata, got a number (42)"}},

		// Names.
		{name: "name with upper case and underscore", input: svcDoc + "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: Foo_Bar\n",
			wantErr: []string{`test.yaml, document 2: metadata.name: "Foo_Bar" is not a valid name: must be lower case alphanumeric characters, '-' or '.', start and end with an alphanumeric (DNS-1123 subdomain)`}},
		{name: "name upper case", input: "apiVersion: v1\nkind: Service\nmetadata:\n  name: Web\n",
			wantErr: []string{"document 1", `metadata.name: "Web" is not a valid name`, "DNS-1123 subdomain"}},
		{name: "name 254 characters", input: "apiVersion: v1\nkind: Service\nmetadata:\n  name: " + strings.Repeat("a", 254) + "\n",
			wantErr: []string{"document 1", "metadata.name:", "must be no more than 253 characters, has 254", "(254 bytes)"}},
		{name: "name empty", input: "apiVersion: v1\nkind: Service\nmetadata:\n  name: \"\"\n",
			wantErr: []string{"document 1", "metadata.name: must not be empty"}},
		{name: "name starts with dash", input: "apiVersion: v1\nkind: Service\nmetadata:\n  name: -web\n",
			wantErr: []string{"document 1", `metadata.name: "-web" is not a valid name`}},
		{name: "namespace with dot", input: withMetadata("  namespace: my.ns\n"),
			wantErr: []string{"document 1", `metadata.namespace: "my.ns" is not a valid namespace`, "DNS-1123 label"}},
		{name: "namespace too long", input: withMetadata("  namespace: " + strings.Repeat("n", 64) + "\n"),
			wantErr: []string{"document 1", "metadata.namespace:", "no more than 63 characters, has 64"}},
		{name: "group not a subdomain", input: withMetadata("  group: Release_1\n"),
			wantErr: []string{"document 1", `metadata.group: "Release_1" is not a valid group`}},
		{name: "label key starts with dash", input: withMetadata("  labels:\n    -app: web\n"),
			wantErr: []string{"document 1", `metadata.labels["-app"]: "-app" is not a valid label key`}},
		{name: "label key with bad prefix", input: withMetadata("  labels:\n    Example.com/app: web\n"),
			wantErr: []string{"document 1", `metadata.labels["Example.com/app"]`, "the prefix before '/'"}},
		{name: "label value with space", input: withMetadata("  labels:\n    app: my web\n"),
			wantErr: []string{"document 1", `metadata.labels.app: "my web" is not a valid label value`}},
		{name: "label value too long", input: withMetadata("  labels:\n    app: " + strings.Repeat("v", 64) + "\n"),
			wantErr: []string{"document 1", "metadata.labels.app:", "no more than 63 characters, has 64"}},
		{name: "annotation key invalid", input: withMetadata("  annotations:\n    \"a b\": x\n"),
			wantErr: []string{"document 1", `metadata.annotations["a b"]: "a b" is not a valid annotation key`}},
		{name: "annotations too large", input: withMetadata("  annotations:\n    a: " + strings.Repeat("x", 200<<10) + "\n    b: " + strings.Repeat("y", 100<<10) + "\n"),
			wantErr: []string{"document 1", "metadata.annotations: keys and values total 307202 bytes", "256 KiB"}},
		{name: "finalizer invalid", input: withMetadata("  finalizers: [\"clean up\"]\n"),
			wantErr: []string{"document 1", `metadata.finalizers[0]: "clean up" is not a valid finalizer`}},

		// Shape.
		{name: "unknown top-level field", input: svcDoc + "data:\n  key: value\n",
			wantErr: []string{"document 1", `data: unknown field "data"`, "settings belong under spec"}},
		{name: "top-level field with wrong case", input: svcDoc + "Spec: {}\n",
			wantErr: []string{"document 1", `Spec: unknown field "Spec"; did you mean "spec"?`}},
		{name: "unknown metadata field", input: withMetadata("  ownerReferences: []\n"),
			wantErr: []string{"document 1", `metadata.ownerReferences: unknown field "ownerReferences"`}},
		{name: "missing apiVersion", input: "kind: Service\nmetadata:\n  name: a\n",
			wantErr: []string{"document 1", "apiVersion: is required"}},
		{name: "apiVersion with two slashes", input: "apiVersion: apps/v1/beta\nkind: Service\nmetadata:\n  name: a\n",
			wantErr: []string{"document 1", `apiVersion: "apps/v1/beta" is not a valid apiVersion`}},
		{name: "missing kind", input: "apiVersion: v1\nmetadata:\n  name: a\n",
			wantErr: []string{"document 1", "kind: is required"}},
		{name: "kind lower case", input: "apiVersion: v1\nkind: service\nmetadata:\n  name: a\n",
			wantErr: []string{"document 1", `kind: "service" is not a valid kind`, "upper case"}},
		{name: "missing metadata", input: "apiVersion: v1\nkind: Service\nspec: {}\n",
			wantErr: []string{"document 1", "metadata: is required"}},
		{name: "missing name", input: "apiVersion: v1\nkind: Service\nmetadata:\n  namespace: x\n",
			wantErr: []string{"document 1", "metadata.name: is required"}},
		{name: "several problems in one document are all reported", input: "apiVersion: v1\nkind: service\nmetadata:\n  name: A\n",
			wantErr: []string{`document 1: kind: "service"`, `document 1: metadata.name: "A"`}},
		{name: "List item invalid", input: "apiVersion: v1\nkind: List\nitems:\n  - " + strings.ReplaceAll(svcDoc, "\n", "\n    ") + "\n  - apiVersion: v1\n    kind: Service\n    metadata: {name: B}\n",
			wantErr: []string{"document 1", `items[1].metadata.name: "B" is not a valid name`}},
		{name: "List inside List", input: "apiVersion: v1\nkind: List\nitems:\n  - {apiVersion: v1, kind: List, items: []}\n",
			wantErr: []string{"document 1", "items[0].kind: a List cannot contain another List"}},

		// dependsOn.
		{name: "dependsOn itself", input: "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\n  namespace: ns\n  dependsOn:\n    - {kind: Deployment.apps, name: a}\n",
			wantErr: []string{"document 1", "metadata.dependsOn[0]: object Deployment.apps/ns/a depends on itself"}},
		{name: "dependsOn missing name", input: withMetadata("  dependsOn:\n    - kind: Service\n"),
			wantErr: []string{"document 1", "metadata.dependsOn[0].name: is required"}},
		{name: "dependsOn with apiVersion", input: withMetadata("  dependsOn:\n    - {apiVersion: apps/v1, kind: Deployment, name: b}\n"),
			wantErr: []string{"document 1", `metadata.dependsOn[0].apiVersion: unknown field "apiVersion"`, "Deployment.apps"}},
		{name: "dependsOn listed twice", input: withMetadata("  dependsOn:\n    - {kind: Service, name: b}\n    - {kind: Service, name: b}\n"),
			wantErr: []string{"document 1", "metadata.dependsOn[1]: Service/b is listed twice (also at metadata.dependsOn[0])"}},

		// Across documents.
		{name: "duplicate object key", input: svcDoc + "---\n" + svcDoc,
			wantErr: []string{"document 2", "metadata.name: object Service/ok is already defined in document 1"}},
		{name: "empty documents count for numbering", input: svcDoc + "---\n---\n# nothing\n---\nkind: Service\n",
			wantErr: []string{"document 4", "apiVersion: is required"}},
		{name: "too many documents", input: tooManyDocuments(),
			wantErr: []string{fmt.Sprintf("document %d", MaxDocuments+1), "too many documents: the limit is 10000"}},

		// Hostile values.
		{name: "oversize document is not parsed", input: oversizeInvalid(),
			wantErr: []string{"document 2: document is 1048577 bytes, more than the limit of 1048576"}},
		{name: "oversize JSON array element", input: `[{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"}},{"x":"` + strings.Repeat("x", MaxObjectBytes) + `"}]`,
			wantErr: []string{"document 2: document is 1048584 bytes"}},
		{name: "alias bomb", input: billionLaughs(),
			wantErr: []string{"document 1", "spec.l", "too many aliases: expanding them creates more than 100000 nodes"}},
		{name: "merge chain", input: mergeChain(),
			wantErr: []string{"document 1", "spec.m", "too many aliases"}},
		{name: "alias of a large string", input: withSpec("  big: &big " + strings.Repeat("x", 300<<10) + "\n  copies: [*big, *big, *big, *big]\n"),
			wantErr: []string{"document 1", "spec.copies[3]", "too many aliases: expanding them creates more than 1048576 bytes"}},
		{name: "self-referencing anchor", input: withSpec("  a: &a [*a]\n"),
			wantErr: []string{"document 1", "spec.a[0]"}},
		{name: "deep nesting", input: deepSpec(101),
			wantErr: []string{"document 1", "spec.x[0][0]", "nested deeper than 100 levels"}},
		{name: "duplicate key", input: "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n  name: b\n",
			wantErr: []string{"document 1", `metadata.name: duplicate key "name" on line 5 (first on line 4)`}},
		{name: "duplicate key in spec of second document", input: svcDoc + "---\n" + withSpec("  port: 1\n  port: 2\n"),
			wantErr: []string{"document 2", `spec.port: duplicate key "port" on line 12 (first on line 11)`}},
		{name: "integer too large", input: withSpec("  id: 9007199254740993\n"),
			wantErr: []string{"document 1", `spec.id: integer "9007199254740993" is too large to store exactly`, "quote it"}},
		{name: "integer beyond 64 bits", input: withSpec("  id: -123456789012345678901234567890\n"),
			wantErr: []string{"document 1", "spec.id: integer", "too large"}},
		{name: "NaN", input: withSpec("  ratio: .nan\n"),
			wantErr: []string{"document 1", `spec.ratio: ".nan" is not a finite number`}},
		{name: "non-string map key", input: withSpec("  ports:\n    80: http\n"),
			wantErr: []string{"document 1", `spec.ports: map key "80" on line 7 is an integer, not a string; quote it`}},
		{name: "boolean map key", input: withSpec("  true: 1\n"),
			wantErr: []string{"document 1", `spec: map key "true" on line 6 is a boolean`}},
		{name: "complex map key", input: withSpec("  ? [a, b]\n  : c\n"),
			wantErr: []string{"document 1", "spec: map key on line 6 is a list; keys must be strings"}},
		{name: "binary tag", input: withSpec("  data: !!binary aGVsbG8=\n"),
			wantErr: []string{"document 1", "spec.data: tag !!binary is not supported"}},
		{name: "custom tag", input: withSpec("  data: !vault secret/db\n"),
			wantErr: []string{"document 1", "spec.data: tag !vault is not supported"}},
		{name: "set tag", input: withSpec("  data: !!set {a, b}\n"),
			wantErr: []string{"document 1", "spec.data: tag !!set is not supported"}},
		{name: "encoded object over 1 MiB", input: withSpec("  n: [" + strings.Repeat("1,", 400_000) + "1]\n"),
			wantErr: []string{"document 1", "object is", "bytes encoded, more than the limit of 1048576"}},

		// Broken JSON.
		{name: "JSON array not closed", input: `[{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}}`,
			wantErr: []string{"test.yaml: invalid JSON: the array is not closed"}},
		{name: "JSON trailing comma", input: `[{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}},]`,
			wantErr: []string{"document 1", "trailing comma"}},
		{name: "JSON missing comma", input: `[{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}}}]`,
			wantErr: []string{"document 1", `unexpected '}' after the element`}},
		{name: "JSON content after array", input: "[]\n{}\n",
			wantErr: []string{"invalid JSON: unexpected content on line 2 after the array"}},
		{name: "JSON object syntax error", input: "{\"apiVersion\": \"v1\",\n \"kind\": \"Service\"\n \"metadata\": {}}",
			wantErr: []string{"document 1", "invalid YAML: line 2: did not find expected ',' or '}'"}},
	}
	if len(tests) < 35 {
		t.Fatalf("only %d hostile cases", len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := Decode("test.yaml", []byte(tt.input))
			if err == nil {
				t.Fatalf("got %d objects and no error, want an error containing %q", len(objs), tt.wantErr)
			}
			if objs != nil {
				t.Errorf("got %d objects alongside the error, want none", len(objs))
			}
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("got %T, want a non-empty Errors", err)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not contain %q:\n%s", want, truncate(err.Error()))
				}
			}
		})
	}
}

func truncate(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "..."
	}
	return s
}

// Alias bombs must be rejected by counting, not by running out of time or
// memory. The bound is on memory allocated, not time (a loaded machine
// must not fail it): far above what decoding the bomb's text takes, far
// below what expanding it would (387 million nodes for billion laughs).
func TestAliasBombsFailFast(t *testing.T) {
	for _, tt := range []struct{ name, input string }{
		{"billion laughs", billionLaughs()},
		{"merge chain", mergeChain()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Decode("bomb.yaml", []byte(tt.input))
			runtime.ReadMemStats(&after)
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
				t.Errorf("Decode allocated %d MiB, want far less: the aliases were expanded", alloc>>20)
			}
			if err == nil || !strings.Contains(err.Error(), "too many aliases") {
				t.Errorf("got %v, want a too-many-aliases error", err)
			}
		})
	}
}

// The size limit applies before parsing: an oversize document that is also
// broken YAML yields exactly one error, about its size.
func TestOversizeCheckedBeforeParsing(t *testing.T) {
	_, err := Decode("big.yaml", []byte(oversizeInvalid()))
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("got %v, want Errors", err)
	}
	if len(es) != 1 || es[0].Doc != 2 || !strings.HasPrefix(es[0].Reason, "document is 1048577 bytes") {
		t.Errorf("got %v, want one size error in document 2", es)
	}
}

func TestErrorFields(t *testing.T) {
	_, err := Decode("deploy.yaml", []byte(svcDoc+"---\n"+withMetadata("  labels: {app: \"a b\"}\n")))
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v, want an *Error", err)
	}
	want := Error{Source: "deploy.yaml", Doc: 2, Field: "metadata.labels.app",
		Reason: `"a b" is not a valid label value: must be empty or consist of alphanumeric characters, '-', '_' or '.', and start and end with an alphanumeric`}
	if *e != want {
		t.Errorf("got  %#v\nwant %#v", *e, want)
	}
}

func TestErrorsAreCapped(t *testing.T) {
	var b strings.Builder
	for range MaxErrors + 20 {
		b.WriteString("kind: Service\n---\n")
	}
	_, err := Decode("many.yaml", []byte(b.String()))
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("got %v, want Errors", err)
	}
	// Each document has two problems (apiVersion and metadata missing).
	if len(es) != MaxErrors {
		t.Errorf("got %d errors, want %d", len(es), MaxErrors)
	}
	if last := es[len(es)-1]; last.Doc != MaxErrors/2 {
		t.Errorf("last error is in document %d, want %d", last.Doc, MaxErrors/2)
	}
}
