package scenario_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetplane/jetplane/internal/scenario"
)

func TestRunReplaysCommands(t *testing.T) {
	path := filepath.Join(t.TempDir(), "echo.txt")
	text := "# echo says its arguments back\necho a b\n----\na b\n\necho\n----\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var seen []string
	scenario.Run(t, path, func(t *testing.T, c scenario.Cmd) string {
		seen = append(seen, c.Name+"@"+filepath.Base(c.Pos))
		return strings.Join(c.Args, " ")
	})
	if strings.Join(seen, ",") != "echo@echo.txt:2,echo@echo.txt:6" {
		t.Fatalf("commands seen: %v", seen)
	}
}
