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
