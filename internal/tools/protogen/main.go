// Command protogen regenerates the Go code of jetplane's protobuf schemas.
//
// It compiles the .proto files with a pure-Go compiler and runs the same code
// generator as protoc-gen-go, both pinned in go.mod, so regeneration needs
// nothing but Go: `go run ./internal/tools/protogen`. With -check it writes
// nothing and fails when the committed code differs from what it would write.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/cmd/protoc-gen-go/internal_gengo"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

func main() {
	root := flag.String("proto", "schemas/proto", "directory holding the .proto sources")
	out := flag.String("out", "schemas", "directory the generated Go files go to")
	module := flag.String("module", "github.com/jetplane/jetplane/schemas", "Go import path of -out")
	check := flag.Bool("check", false, "write nothing; exit 1 if generated code is out of date")
	flag.Parse()
	if err := run(*root, *out, *module, *check); err != nil {
		fmt.Fprintln(os.Stderr, "protogen:", err)
		os.Exit(1)
	}
}

func run(root, out, module string, check bool) error {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".proto") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	compiler := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{root}}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	linked, err := compiler.Compile(context.Background(), files...)
	if err != nil {
		return err
	}

	// The request lists every file in dependency order, as protoc does.
	req := &pluginpb.CodeGeneratorRequest{FileToGenerate: files, Parameter: ptr("paths=source_relative")}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := 0; i < imports.Len(); i++ {
			add(imports.Get(i).FileDescriptor)
		}
		req.ProtoFile = append(req.ProtoFile, protodesc.ToFileDescriptorProto(fd))
	}
	for _, f := range linked {
		add(f)
	}
	for _, fdp := range req.ProtoFile {
		if !strings.HasPrefix(fdp.GetName(), "google/") {
			// The Go package comes from the flag so the sources stay free of
			// layout decisions.
			if fdp.Options == nil {
				fdp.Options = &descriptorpb.FileOptions{}
			}
			fdp.Options.GoPackage = ptr(module)
		}
	}

	plugin, err := protogen.Options{}.New(req)
	if err != nil {
		return err
	}
	for _, f := range plugin.Files {
		if f.Generate {
			internal_gengo.GenerateFile(plugin, f)
		}
	}
	resp := plugin.Response()
	if resp.Error != nil {
		return fmt.Errorf("generate: %s", resp.GetError())
	}
	var stale []string
	for _, gf := range resp.File {
		// paths=source_relative keeps the proto directory layout; the Go
		// files all belong to one package, so flatten them into -out.
		name := filepath.Join(out, filepath.Base(gf.GetName()))
		content := []byte(gf.GetContent())
		if check {
			old, err := os.ReadFile(name)
			if err != nil || !bytes.Equal(old, content) {
				stale = append(stale, name)
			}
			continue
		}
		if err := os.WriteFile(name, content, 0o644); err != nil {
			return err
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("generated code is out of date: %s; run `go run ./internal/tools/protogen` and commit the result", strings.Join(stale, ", "))
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
