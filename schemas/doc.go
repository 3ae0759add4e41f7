// Package schemas holds jetplane's protobuf messages: Object, ObjectKey,
// Event and Snapshot. The Go code is generated from schemas/proto by
// `go run ./internal/tools/protogen` and committed; this package contains no
// logic.
package schemas
