// Package envname names the environment variables a provider's settings
// are read from, for the llm providers and the binary alike.
package envname

import "strings"

// APIKey returns the environment variable a provider's key is read from
// when no KeyStrategy is configured: <PROVIDER>_API_KEY, upper-cased, with
// non-alphanumerics turned into underscores.
func APIKey(provider string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(provider) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String() + "_API_KEY"
}
