// Package models resolves the "provider:model" names the agentry command
// line and configuration files use into UPP-1.3 model references.
package models

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/demo"
	"github.com/agentry-dev/agentry/internal/envname"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/anthropic"
	"github.com/agentry-dev/agentry/llm/gemini"
	"github.com/agentry-dev/agentry/llm/ollama"
	"github.com/agentry-dev/agentry/llm/openai"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// Default is the model used when none is named: the offline demo model.
const Default = "scripted:" + demo.ModelID

// compatible are OpenAI-compatible servers known by name.
var compatible = map[string]string{
	"groq":       "https://api.groq.com/openai/v1",
	"openrouter": "https://openrouter.ai/api/v1",
	"vllm":       "http://localhost:8000/v1",
	"llamacpp":   "http://localhost:8080/v1",
	"lmstudio":   "http://localhost:1234/v1",
}

type factory struct {
	about string
	make  func(model, baseURL string) (llm.ModelReference, error)
}

var providers = map[string]factory{
	"anthropic": {"Anthropic Messages API (ANTHROPIC_API_KEY)", func(m, _ string) (llm.ModelReference, error) {
		return anthropic.Model(m, nil), nil
	}},
	"openai": {"OpenAI Responses API (OPENAI_API_KEY)", func(m, _ string) (llm.ModelReference, error) {
		return openai.Model(m, nil), nil
	}},
	"openai-chat": {"OpenAI Chat Completions API (OPENAI_API_KEY)", func(m, _ string) (llm.ModelReference, error) {
		return openai.Model(m, &openai.Options{API: openai.ChatCompletions}), nil
	}},
	"gemini": {"Google Gemini API (GEMINI_API_KEY or GOOGLE_API_KEY)", func(m, _ string) (llm.ModelReference, error) {
		return gemini.Model(m, nil), nil
	}},
	"ollama": {"Ollama native API (OLLAMA_HOST, default http://localhost:11434)", func(m, _ string) (llm.ModelReference, error) {
		return ollama.Model(m, nil), nil
	}},
	"compat": {"any OpenAI-compatible server at --base-url or COMPAT_BASE_URL (COMPAT_API_KEY, optional)", func(m, base string) (llm.ModelReference, error) {
		if base == "" {
			return llm.ModelReference{}, fmt.Errorf("compat:%s needs the server's base URL (e.g. http://localhost:8000/v1): give it as a flag (--base-url; serve: --agent-base-url) or in %s", m, EnvBaseURLName("compat"))
		}
		return openai.Compatible("compat", base, m, nil), nil
	}},
	"scripted": {"offline models: scripted:demo, scripted:support (the example support agent's), scripted:echo (answers with the prompt), scripted:shopper (shops in the store workflow), or scripted:FILE playing a YAML/JSON script", func(m, _ string) (llm.ModelReference, error) {
		switch m {
		case demo.ModelID:
			return demo.Model().Ref(), nil
		case builtin.SupportModelID:
			return builtin.SupportModel().Ref(), nil
		case builtin.EchoModelID:
			return builtin.EchoModel().Ref(), nil
		case builtin.ShopperModelID:
			return builtin.ShopperModel().Ref(), nil
		}
		f, err := os.Open(m)
		if err != nil {
			return llm.ModelReference{}, fmt.Errorf("scripted: %w", err)
		}
		defer f.Close()
		sm, err := scripted.Load(f)
		if err != nil {
			return llm.ModelReference{}, err
		}
		sm.ID = m
		return sm.Ref(), nil
	}},
}

func init() {
	for name, base := range compatible {
		providers[name] = factory{"OpenAI-compatible server at " + base + " (" + envname.APIKey(name) + ")",
			func(m, _ string) (llm.ModelReference, error) { return openai.Compatible(name, base, m, nil), nil }}
	}
}

// vendorBaseURLEnv are the vendors' own variables for their API address,
// read after <PROVIDER>_BASE_URL. (Ollama's OLLAMA_HOST is read by the
// ollama provider itself, which normalises it as Ollama does.)
var vendorBaseURLEnv = map[string][]string{
	"openai-chat": {"OPENAI_BASE_URL"},
	"gemini":      {"GOOGLE_GEMINI_BASE_URL"},
}

// EnvBaseURLName returns the environment variable that sets a provider's
// API address: <PROVIDER>_BASE_URL, upper-cased, with non-alphanumerics
// turned into underscores (ANTHROPIC_BASE_URL, OPENAI_BASE_URL,
// COMPAT_BASE_URL, GROQ_BASE_URL…).
func EnvBaseURLName(provider string) string {
	return strings.TrimSuffix(envname.APIKey(provider), "_API_KEY") + "_BASE_URL"
}

// BaseURLEnv lists the environment variables a provider's API address is
// read from, in order, when no flag gives it: EnvBaseURLName, then the
// vendor's own (OPENAI_BASE_URL for openai-chat, GOOGLE_GEMINI_BASE_URL);
// nil for the offline scripted models.
func BaseURLEnv(provider string) []string {
	if provider == "scripted" {
		return nil
	}
	return append([]string{EnvBaseURLName(provider)}, vendorBaseURLEnv[provider]...)
}

// Resolve turns "provider:model" into a model reference. Its API address
// is baseURL when set (a flag), else the first of the provider's
// BaseURLEnv variables that is set, else the provider's default (for
// ollama: OLLAMA_HOST, else localhost).
func Resolve(spec, baseURL string) (llm.ModelReference, error) {
	provider, model, ok := strings.Cut(spec, ":")
	if !ok || provider == "" || model == "" {
		return llm.ModelReference{}, fmt.Errorf("model %q is not of the form provider:model (e.g. anthropic:claude-sonnet-4-5)", spec)
	}
	f, ok := providers[provider]
	if !ok {
		return llm.ModelReference{}, fmt.Errorf("unknown provider %q; known: %s", provider, strings.Join(Providers(), ", "))
	}
	for _, name := range BaseURLEnv(provider) {
		if baseURL != "" {
			break
		}
		baseURL = strings.TrimSpace(os.Getenv(name))
	}
	ref, err := f.make(model, baseURL)
	if err != nil {
		return llm.ModelReference{}, err
	}
	if baseURL != "" {
		cfg := llm.ProviderConfig{}
		if ref.Config != nil {
			cfg = *ref.Config
		}
		cfg.BaseURL = baseURL
		ref.Config = &cfg
	}
	return ref, nil
}

// Providers lists the known provider names, sorted.
func Providers() []string {
	names := make([]string, 0, len(providers))
	for n := range providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// About describes a provider for help texts.
func About(provider string) string { return providers[provider].about }

// MaxTokens returns the params that cap a reply at n tokens in the
// provider's own vocabulary; nil when the provider has no such parameter.
// Anthropic requires one: with n == 0 it gets 4096.
func MaxTokens(ref llm.ModelReference, n int) map[string]any {
	name := ""
	if ref.Provider != nil {
		name = ref.Provider.Name()
	}
	if name == "anthropic" && n == 0 {
		n = 4096
	}
	if n <= 0 {
		return nil
	}
	switch name {
	case "anthropic":
		return map[string]any{"max_tokens": n}
	case "openai":
		if o, _ := ref.Options.(*openai.Options); o != nil && o.API == openai.ChatCompletions {
			return map[string]any{"max_completion_tokens": n}
		}
		return map[string]any{"max_output_tokens": n}
	case "gemini":
		return map[string]any{"generationConfig": map[string]any{"maxOutputTokens": n}}
	case "ollama":
		return map[string]any{"options": map[string]any{"num_predict": n}}
	case "scripted":
		return nil
	}
	if _, ok := compatible[name]; ok || name == "compat" { // OpenAI-compatible servers
		return map[string]any{"max_tokens": n}
	}
	return nil
}
