// Command wasmstart makes a module built with scheduler/guest (standard
// Go, -buildmode=c-shared, a WASI reactor) start the way
// kube-scheduler-wasm-extension's host starts a guest: it adds an export
// "_start" naming the same function as "_initialize", so that a host that
// runs only _start initializes the Go runtime and registers the plugin.
// jetplane's host runs either.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o plugin.wasm .
//	go run github.com/jetplane/jetplane/scheduler/guest/cmd/wasmstart plugin.wasm
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: wasmstart MODULE.wasm (rewritten in place)")
		os.Exit(2)
	}
	code, err := os.ReadFile(os.Args[1])
	if err == nil {
		code, err = AddStart(code)
	}
	if err == nil {
		err = os.WriteFile(os.Args[1], code, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "wasmstart:", err)
		os.Exit(1)
	}
}

func uvarint(b []byte) (uint64, int, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, 0, errors.New("malformed LEB128")
	}
	return v, n, nil
}

// AddStart returns code with "_start" exported as "_initialize" is; code
// that exports _start already is returned as it is.
func AddStart(code []byte) ([]byte, error) {
	if len(code) < 8 || string(code[:4]) != "\x00asm" {
		return nil, errors.New("not a WebAssembly module")
	}
	for off := 8; off < len(code); {
		id := code[off]
		size, n, err := uvarint(code[off+1:])
		if err != nil {
			return nil, err
		}
		start, end := off+1+n, off+1+n+int(size)
		if end > len(code) {
			return nil, errors.New("truncated section")
		}
		if id != 7 {
			off = end
			continue
		}
		body := code[start:end]
		count, n, err := uvarint(body)
		if err != nil {
			return nil, err
		}
		init := -1
		for i, p := uint64(0), n; i < count; i++ {
			nameLen, n, err := uvarint(body[p:])
			if err != nil {
				return nil, err
			}
			name := string(body[p+n : p+n+int(nameLen)])
			p += n + int(nameLen)
			kind := body[p]
			idx, n, err := uvarint(body[p+1:])
			if err != nil {
				return nil, err
			}
			p += 1 + n
			switch {
			case name == "_start":
				return code, nil
			case name == "_initialize" && kind == 0:
				init = int(idx)
			}
		}
		if init < 0 {
			return nil, errors.New("the module exports no _initialize (build it with -buildmode=c-shared)")
		}
		nb := binary.AppendUvarint(nil, count+1)
		nb = append(nb, body[n:]...)
		nb = binary.AppendUvarint(nb, uint64(len("_start")))
		nb = append(nb, "_start"...)
		nb = append(nb, 0)
		nb = binary.AppendUvarint(nb, uint64(init))
		out := append([]byte(nil), code[:off]...)
		out = append(out, 7)
		out = binary.AppendUvarint(out, uint64(len(nb)))
		out = append(out, nb...)
		return append(out, code[end:]...), nil
	}
	return nil, errors.New("the module has no export section")
}
