package repotest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestSpecsCitedByPublicLocation enforces that no file cites a
// specification by a path that is not in the repository (the texts are
// published elsewhere; docs/specs.md lists where): each protocol is cited
// by its public name, version and location.
func TestSpecsCitedByPublicLocation(t *testing.T) {
	root := moduleRoot(t)
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	// Built from parts so that this file does not match itself.
	local := regexp.MustCompile(`\b` + "spec" + `s/(uap|uaip|uaicp|uamp|uiap|upp)[-a-z0-9._/]*`)
	var bad []string
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if rel == "" || strings.Contains(rel, "node_modules/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil || bytes.IndexByte(b, 0) >= 0 { // deleted in the work tree, or binary
			continue
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := local.FindString(line); m != "" {
				bad = append(bad, rel+":"+strconv.Itoa(i+1)+": "+m)
			}
		}
	}
	if len(bad) > 0 {
		t.Errorf("specifications cited by a path outside the repository (cite name, version and public location; docs/specs.md):\n%s", strings.Join(bad, "\n"))
	}
}
