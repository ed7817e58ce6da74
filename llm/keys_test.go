package llm_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/llm"
)

const secret = "sk-live-SECRET-123"

func TestUPP_4_2_KeysAreNeverPrinted(t *testing.T) {
	for name, ks := range map[string]llm.KeyStrategy{
		"static":      llm.StaticKey(secret),
		"round robin": llm.NewRoundRobinKeys(secret, "other"),
		"weighted":    llm.NewWeightedKeys(llm.WeightedKey{Key: secret, Weight: 1}),
	} {
		var logs bytes.Buffer
		slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "key", ks)
		cfg := llm.ProviderConfig{APIKey: ks}
		for _, s := range []string{fmt.Sprint(ks), fmt.Sprintf("%v %+v %#v %s", ks, ks, ks, ks), fmt.Sprintf("%+v %#v", cfg, cfg), logs.String()} {
			if strings.Contains(s, secret) {
				t.Errorf("%s: key printed: %s", name, s)
			}
		}
	}
}

func TestUPP_4_2_KeyStrategies(t *testing.T) {
	ctx := context.Background()
	rr := llm.NewRoundRobinKeys("a", "b", "c")
	var got []string
	for range 5 {
		k, _ := rr.Key(ctx)
		got = append(got, k)
	}
	if strings.Join(got, "") != "abcab" {
		t.Errorf("round robin = %v", got)
	}
	w := llm.NewWeightedKeys(llm.WeightedKey{Key: "never", Weight: 0}, llm.WeightedKey{Key: "mostly", Weight: 9}, llm.WeightedKey{Key: "rarely", Weight: 1})
	counts := map[string]int{}
	for range 2000 {
		k, err := w.Key(ctx)
		if err != nil {
			t.Fatal(err)
		}
		counts[k]++
	}
	if counts["never"] != 0 || counts["mostly"] < 1600 || counts["rarely"] < 100 {
		t.Errorf("weighted distribution %v", counts)
	}
	if _, err := llm.NewWeightedKeys().Key(ctx); err == nil {
		t.Error("empty weighted keys gave a key")
	}
	dyn := llm.KeyFunc(func(context.Context) (string, error) { return "dynamic", nil })
	if k, _ := dyn.Key(ctx); k != "dynamic" {
		t.Errorf("KeyFunc = %q", k)
	}
}
