package agentfile_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/agentfile"
)

// FuzzLoad: any bytes give a definition or errors that are *Error naming
// the file, never a panic; a definition loaded once loads again alike.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{full, "model: scripted:demo\n", "model: [\n", "- a\n", "{}", "model: x:y\ntools: [{agent: a}, {agent: a}]\n",
		"model: scripted:demo\ngovern: {risk: {'[': read_only}}\n", "&a [*a]\n", "model: scripted:demo\n---\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := agentfile.Load(strings.NewReader(string(b)), "f.yaml")
		if err != nil {
			var le *agentfile.Error
			if !errors.As(err, &le) && !strings.Contains(err.Error(), "f.yaml") {
				t.Fatalf("error names no file: %v", err)
			}
			return
		}
		again, err := agentfile.Load(strings.NewReader(string(b)), "f.yaml")
		if err != nil || again.Name != d.Name || again.Model != d.Model || len(again.Tools) != len(d.Tools) {
			t.Fatalf("loading twice differs: %+v %+v %v", d, again, err)
		}
	})
}
