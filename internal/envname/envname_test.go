package envname

import "testing"

func TestAPIKey(t *testing.T) {
	tests := []struct{ provider, want string }{
		{"anthropic", "ANTHROPIC_API_KEY"},
		{"acme-cloud", "ACME_CLOUD_API_KEY"},
		{"x.ai 2", "X_AI_2_API_KEY"},
	}
	for _, tt := range tests {
		if got := APIKey(tt.provider); got != tt.want {
			t.Errorf("APIKey(%q) = %q, want %q", tt.provider, got, tt.want)
		}
	}
}
