package models

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolve(t *testing.T) {
	for spec, want := range map[string]string{
		"anthropic:claude-sonnet-4-5": "anthropic:claude-sonnet-4-5",
		"openai:gpt-5-mini":           "openai:gpt-5-mini",
		"openai-chat:gpt-4o":          "openai:gpt-4o",
		"gemini:gemini-2.5-flash":     "gemini:gemini-2.5-flash",
		"ollama:llama3.2":             "ollama:llama3.2",
		"groq:llama-3.3-70b":          "groq:llama-3.3-70b",
		"vllm:Qwen/Qwen3-8B":          "vllm:Qwen/Qwen3-8B",
		"scripted:demo":               "scripted:demo",
		"ollama:qwen3:8b":             "ollama:qwen3:8b",
	} {
		ref, err := Resolve(spec, "")
		if err != nil {
			t.Errorf("%s: %v", spec, err)
			continue
		}
		if got := ref.String(); got != want {
			t.Errorf("%s → %s, want %s", spec, got, want)
		}
	}
	for _, bad := range []string{"", "claude", ":x", "anthropic:", "acme:model", "scripted:other", "compat:m"} {
		if _, err := Resolve(bad, ""); err == nil {
			t.Errorf("%q resolved", bad)
		}
	}
	ref, err := Resolve("compat:m", "http://localhost:9999/v1")
	if err != nil || ref.Config == nil || ref.Config.BaseURL != "http://localhost:9999/v1" {
		t.Errorf("compat with base URL: %v %+v", err, ref.Config)
	}
	ref, _ = Resolve("anthropic:x", "http://proxy")
	if ref.Config.BaseURL != "http://proxy" {
		t.Error("--base-url not applied")
	}
	if !strings.Contains(About("anthropic"), "ANTHROPIC_API_KEY") {
		t.Errorf("About = %q", About("anthropic"))
	}
}

func TestMaxTokens(t *testing.T) {
	for spec, want := range map[string]map[string]any{
		"anthropic:m":   {"max_tokens": 100},
		"openai:m":      {"max_output_tokens": 100},
		"openai-chat:m": {"max_completion_tokens": 100},
		"gemini:m":      {"generationConfig": map[string]any{"maxOutputTokens": 100}},
		"ollama:m":      {"options": map[string]any{"num_predict": 100}},
		"groq:m":        {"max_tokens": 100},
		"scripted:demo": nil,
	} {
		ref, _ := Resolve(spec, "")
		if diff := cmp.Diff(want, MaxTokens(ref, 100)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", spec, diff)
		}
	}
	ref, _ := Resolve("anthropic:m", "")
	if got := MaxTokens(ref, 0); got["max_tokens"] != 4096 {
		t.Errorf("anthropic default = %v", got)
	}
	ref, _ = Resolve("openai:m", "")
	if MaxTokens(ref, 0) != nil {
		t.Error("a cap was invented for openai")
	}
}

// A provider's API address: the flag, else <PROVIDER>_BASE_URL, else the
// vendor's own variable, else the default (no Config.BaseURL).
func TestResolveBaseURL(t *testing.T) {
	for _, name := range []string{"OPENAI_BASE_URL", "OPENAI_CHAT_BASE_URL", "ANTHROPIC_BASE_URL", "COMPAT_BASE_URL", "GROQ_BASE_URL", "GEMINI_BASE_URL", "GOOGLE_GEMINI_BASE_URL", "SCRIPTED_BASE_URL"} {
		t.Setenv(name, "")
	}
	for _, tc := range []struct {
		name, spec, flag string
		env              map[string]string
		want             string
	}{
		{"default", "anthropic:m", "", nil, ""},
		{"provider variable", "anthropic:m", "", map[string]string{"ANTHROPIC_BASE_URL": "http://a"}, "http://a"},
		{"flag first", "anthropic:m", "http://flag", map[string]string{"ANTHROPIC_BASE_URL": "http://a"}, "http://flag"},
		{"openai", "openai:m", "", map[string]string{"OPENAI_BASE_URL": "http://o/v1"}, "http://o/v1"},
		{"openai-chat: vendor variable", "openai-chat:m", "", map[string]string{"OPENAI_BASE_URL": "http://o/v1"}, "http://o/v1"},
		{"openai-chat: its own first", "openai-chat:m", "", map[string]string{"OPENAI_BASE_URL": "http://o/v1", "OPENAI_CHAT_BASE_URL": "http://c/v1"}, "http://c/v1"},
		{"gemini: vendor variable", "gemini:m", "", map[string]string{"GOOGLE_GEMINI_BASE_URL": "http://g/v1beta"}, "http://g/v1beta"},
		{"compat", "compat:m", "", map[string]string{"COMPAT_BASE_URL": "http://c/v1"}, "http://c/v1"},
		{"groq", "groq:m", "", map[string]string{"GROQ_BASE_URL": "http://q/v1"}, "http://q/v1"},
		{"scripted reads none", "scripted:demo", "", map[string]string{"SCRIPTED_BASE_URL": "http://s"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			ref, err := Resolve(tc.spec, tc.flag)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if ref.Config != nil {
				got = ref.Config.BaseURL
			}
			if got != tc.want {
				t.Errorf("BaseURL = %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := Resolve("compat:m", ""); err == nil || !strings.Contains(err.Error(), "COMPAT_BASE_URL") {
		t.Errorf("compat without a base URL: %v", err)
	}
	if got := EnvBaseURLName("openai-chat"); got != "OPENAI_CHAT_BASE_URL" {
		t.Errorf("EnvBaseURLName = %s", got)
	}
}
