// Command empty does nothing: what a Go module's start costs before its
// own code (BenchmarkModuleStartParts).
package main

func main() {}
