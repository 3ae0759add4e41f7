package scheduler

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScenarios replays every testdata/scenarios/*.txt. Each line is one of
//
//	config FILE                      profiles from a config in testdata/
//	node NAME attr...                a node (see fixtureNode)
//	pod NS/NAME attr... node=NODE    a pod already bound
//	schedule NS/NAME attr... => NODE one cycle; the placement is assumed
//	schedule NS/NAME attr... => 0/3 nodes are available: ...
//
// through the same conversion, cache and cycle the scheduler uses.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/scenarios/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) { runScenario(t, file) })
	}
}

func runScenario(t *testing.T, file string) {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	profiles, err := DefaultConfig().Build(DefaultRegistry())
	if err != nil {
		t.Fatal(err)
	}
	cache := NewCache()
	var rev uint64
	start := 0
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		rev++
		cmd, want, hasWant := strings.Cut(text, "=>")
		words := strings.Fields(cmd)
		where := file + ":" + itoa(line)
		switch words[0] {
		case "config":
			cfg, err := LoadConfig(filepath.Join("testdata", words[1]))
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if profiles, err = cfg.Build(DefaultRegistry()); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
		case "node":
			node, err := NodeFromObject(fixtureNode(t, words[1], attrs(words[2:]), rev))
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			cache.SetNode(node, rev)
		case "pod":
			pod, err := PodFromObject(fixturePod(t, words[1], attrs(words[2:]), rev))
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			cache.SetPod(pod, rev)
		case "schedule":
			if !hasWant {
				t.Fatalf("%s: schedule needs => and the expected node or message", where)
			}
			want = strings.TrimSpace(want)
			pod, err := PodFromObject(fixturePod(t, words[1], attrs(words[2:]), rev))
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			name := ProfileName(pod)
			p := profiles[name]
			if p == nil {
				t.Fatalf("%s: no profile %q", where, name)
			}
			pi := NewPodInfo(pod)
			d := Cycle(context.Background(), p, NewCycleState(cache.Snapshot(), uint64(rev)), pi, start)
			start = d.NextStartIndex
			got := d.Node
			if got == "" {
				got = d.Message()
			} else {
				cache.Assume(pi, d.Node)
			}
			if got != want {
				t.Errorf("%s: %s\n got: %s\nwant: %s", where, words[1], got, want)
			}
		default:
			t.Fatalf("%s: unknown command %q", where, words[0])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
