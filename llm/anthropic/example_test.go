package anthropic_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/anthropic"
)

func ExampleModel() {
	// A stand-in for api.anthropic.com answering one Messages API call.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",
			"content":[{"type":"text","text":"Bonjour !"}],"stop_reason":"end_turn","stop_sequence":null,
			"usage":{"input_tokens":14,"output_tokens":4}}`)
	}))
	defer srv.Close()

	model, err := llm.LLM(&llm.LLMOptions{
		Model:  anthropic.Model("claude-sonnet-4-5", nil),
		Config: llm.ProviderConfig{BaseURL: srv.URL, APIKey: llm.StaticKey("sk-ant-example")},
		System: "Answer in French.",
		Params: map[string]any{"max_tokens": 256}, // required by the Messages API
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
	fmt.Println(turn.Usage.InputTokens, turn.Usage.OutputTokens, turn.Response.Metadata.Provider("anthropic")["stop_reason"])
	// Output:
	// Bonjour !
	// 14 4 end_turn
}
