// Package manifest decodes and validates the manifests people apply — YAML
// streams, JSON objects, JSON arrays and kind: List documents — into
// *schemas.Object values, or rejects them with errors that name the source,
// the document, the field and the reason.
//
// It owns the shape of an object as written by a person: the allowed
// top-level and metadata fields, Kubernetes naming rules (DNS-1123 names,
// qualified label keys), dependsOn references (defaulted to the object's own
// namespace), object keys (KeyOf, KeyString) and the limits that make
// hostile input cheap to reject: MaxObjectBytes checked on each document's
// raw text before it is parsed, MaxDocuments, a budget for YAML alias
// expansion, a nesting limit, and integers that float64 cannot hold exactly.
// Fields jetplane writes itself (uid, generation, resourceVersion, status,
// ...) are dropped, so `kubectl get -o yaml` output applies as it is.
//
// It must not do I/O to the log or know about current state. Decode is a pure
// function of its input, so the gate, the CLI and tests get the same answer.
// The content of built-in Kubernetes kinds is decoded strictly into their
// k8s.io/api types (package builtin), and Pod and Node specs are held to
// jetplane's rules (package podspec). What needs state stays with the gate:
// whether a referenced object exists, dependency cycles across applies (the
// gate runs FindCycle over the current graph plus the new objects), and
// whether a kind is defined and what its CustomResourceDefinition allows
// (package crd).
//
// Documents are numbered from 1 in input order: by position in a YAML stream,
// where empty documents between "---" lines count but blank or comment-only
// text before the first or after the last separator does not, or by position
// in a JSON array. Input whose first non-blank character is '[' is read as a
// JSON array, split into elements before parsing so that the size limit
// applies per element. Items of a List share their document's number and
// are named in Error.Field as items[i].
package manifest
