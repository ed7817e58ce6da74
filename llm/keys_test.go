package llm_test

import (
	"bytes"
	"context"
	"errors"
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

func TestUPP_4_2_ResolveKey(t *testing.T) {
	ctx := context.Background()
	t.Setenv("ACME_CLOUD_API_KEY", "from-env")
	if llm.EnvKeyName("acme-cloud") != "ACME_CLOUD_API_KEY" {
		t.Errorf("EnvKeyName = %s", llm.EnvKeyName("acme-cloud"))
	}
	if k, err := llm.ResolveKey(ctx, nil, "acme-cloud"); err != nil || k != "from-env" {
		t.Errorf("env key = %q, %v", k, err)
	}
	if k, _ := llm.ResolveKey(ctx, llm.StaticKey("explicit"), "acme-cloud"); k != "explicit" {
		t.Errorf("explicit key lost to env: %q", k)
	}
	t.Setenv("ACME_CLOUD_API_KEY", "")
	_, err := llm.ResolveKey(ctx, nil, "acme-cloud")
	if !errors.Is(err, llm.AuthenticationFailed) || !strings.Contains(err.Error(), "ACME_CLOUD_API_KEY") {
		t.Errorf("missing key: %v", err)
	}
	failing := llm.KeyFunc(func(context.Context) (string, error) { return "", errors.New("vault down") })
	if _, err := llm.ResolveKey(ctx, failing, "acme-cloud"); !errors.Is(err, llm.AuthenticationFailed) {
		t.Errorf("failing strategy: %v", err)
	}
	if _, err := llm.ResolveKey(ctx, llm.StaticKey(""), "acme-cloud"); !errors.Is(err, llm.AuthenticationFailed) {
		t.Errorf("empty key: %v", err)
	}
}
