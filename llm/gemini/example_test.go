package gemini_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/gemini"
)

func ExampleModel() {
	// A stand-in for the Gemini API; drop BaseURL and APIKey to use the
	// real one with GEMINI_API_KEY set.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{
			"candidates": [{"content": {"role": "model", "parts": [{"text": "Bonjour !"}]}, "finishReason": "STOP"}],
			"usageMetadata": {"promptTokenCount": 6, "candidatesTokenCount": 3, "totalTokenCount": 9}
		}`)
	}))
	defer srv.Close()

	model, err := llm.LLM(&llm.LLMOptions{
		Model:  gemini.Model("gemini-2.5-flash", nil),
		Config: llm.ProviderConfig{BaseURL: srv.URL, APIKey: llm.StaticKey("my-key")},
		System: "Answer in French.",
		Params: map[string]any{"generationConfig": map[string]any{"temperature": 0.2}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	turn, err := model.Generate(context.Background(), nil, llm.Text("Say hello."))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(turn.Text())
	fmt.Println(turn.Usage.InputTokens, turn.Usage.OutputTokens)
	// Output:
	// Bonjour !
	// 6 3
}
