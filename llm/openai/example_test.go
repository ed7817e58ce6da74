package openai_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/openai"
)

// A stand-in for api.openai.com answering one Responses request.
func fakeOpenAI() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"resp_1","object":"response","status":"completed","model":"gpt-5-mini",
			"output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant",
				"content":[{"type":"output_text","text":"Hello from `+r.URL.Path+`","annotations":[]}]}],
			"usage":{"input_tokens":9,"output_tokens":4,"total_tokens":13}}`)
	}))
}

func ExampleModel() {
	srv := fakeOpenAI()
	defer srv.Close()

	model, err := llm.LLM(&llm.LLMOptions{
		Model:  openai.Model("gpt-5-mini", nil), // the Responses API
		Config: llm.ProviderConfig{BaseURL: srv.URL, APIKey: llm.StaticKey("sk-test")},
		Params: map[string]any{"max_output_tokens": 256},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	turn, err := model.Generate(context.Background(), nil, llm.Text("Say hello"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(turn.Text())
	fmt.Println(turn.Usage.InputTokens, turn.Usage.OutputTokens)
	// Output:
	// Hello from /responses
	// 9 4
}

func ExampleCompatible() {
	// A local OpenAI-compatible server (llama.cpp, vLLM…): Chat
	// Completions, no key needed.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","model":"qwen3",
			"choices":[{"index":0,"message":{"role":"assistant","content":"Hi from `+r.URL.Path+`"},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":5,"completion_tokens":3}}`)
	}))
	defer srv.Close()

	model, _ := llm.LLM(&llm.LLMOptions{Model: openai.Compatible("local", srv.URL+"/v1", "qwen3", nil)})
	turn, err := model.Generate(context.Background(), nil, llm.Text("Hi"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(turn.Text())
	fmt.Println(turn.Response.Metadata.Provider("local")["model"])
	// Output:
	// Hi from /v1/chat/completions
	// qwen3
}
