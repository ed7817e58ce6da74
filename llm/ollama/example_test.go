package ollama_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/ollama"
)

func ExampleModel() {
	// A stand-in for a local Ollama server (normally http://localhost:11434).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"model":"llama3.2","created_at":"2025-01-01T00:00:00Z",`+
			`"message":{"role":"assistant","content":"Rayleigh scattering."},`+
			`"done":true,"done_reason":"stop","prompt_eval_count":12,"eval_count":4}`)
	}))
	defer srv.Close()

	model, err := llm.LLM(&llm.LLMOptions{
		Model:  ollama.Model("llama3.2", nil),
		Config: llm.ProviderConfig{BaseURL: srv.URL},
		Params: map[string]any{"options": map[string]any{"temperature": 0}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	turn, err := model.Generate(context.Background(), nil, llm.Text("Why is the sky blue? One phrase."))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(turn.Text())
	fmt.Println(turn.Usage.InputTokens, turn.Usage.OutputTokens)
	// Output:
	// Rayleigh scattering.
	// 12 4
}
