package strictjson_test

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/agentry-dev/agentry/internal/strictjson"
)

// BenchmarkDecode measures Decode against json.Unmarshal, its baseline,
// on a UAIP /execute body.
func BenchmarkDecode(b *testing.B) {
	body := []byte(`{"workflow_name":"store","action":"method_call","task":"add_to_cart","args":{"product_id":"SKU-005","quantity":1}}`)
	type executeRequest struct {
		WorkflowName string         `json:"workflow_name"`
		Action       string         `json:"action"`
		Task         string         `json:"task,omitempty"`
		Args         map[string]any `json:"args,omitempty"`
		Stage        string         `json:"stage,omitempty"`
		StateUpdates map[string]any `json:"state_updates,omitempty"`
	}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v executeRequest
			if err := json.Unmarshal(body, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("strictjson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v executeRequest
			if err := strictjson.Decode(body, &v, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json-valid+utf8-valid", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !json.Valid(body) || !utf8.Valid(body) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("check-only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := strictjson.Check(body, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
