package convo

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBinaryName: convo.exe on Windows, convo elsewhere.
func TestBinaryName(t *testing.T) {
	for goos, want := range map[string]string{"windows": "convo.exe", "linux": "convo", "darwin": "convo", "freebsd": "convo"} {
		if got := binaryName(goos); got != want {
			t.Errorf("binaryName(%q) = %q, want %q", goos, got, want)
		}
	}
}

// TestFindBinary: WithBinary, then CONVO_BINARY, then this platform's binary name on
// PATH, then ErrBinaryNotFound naming it. No convo runs: the file on PATH is a stand-in.
func TestFindBinary(t *testing.T) {
	dir := t.TempDir()
	name := binaryName(runtime.GOOS)
	onPath := filepath.Join(dir, name)
	if err := os.WriteFile(onPath, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	t.Setenv("CONVO_BINARY", "")

	if got, err := findBinary(""); err != nil || got != onPath {
		t.Errorf("from PATH: got %q, %v; want %q", got, err, onPath)
	}
	t.Setenv("CONVO_BINARY", "/from/env/convo")
	if got, err := findBinary(""); err != nil || got != "/from/env/convo" {
		t.Errorf("from CONVO_BINARY: got %q, %v", got, err)
	}
	if got, err := findBinary("/explicit/convo"); err != nil || got != "/explicit/convo" {
		t.Errorf("explicit: got %q, %v", got, err)
	}

	t.Setenv("CONVO_BINARY", "")
	t.Setenv("PATH", t.TempDir())
	_, err := findBinary("")
	if !errors.Is(err, ErrBinaryNotFound) {
		t.Fatalf("got %v, want ErrBinaryNotFound", err)
	}
	if !strings.Contains(err.Error(), "put "+name+" on PATH") {
		t.Errorf("the error does not name %s: %v", name, err)
	}
}
