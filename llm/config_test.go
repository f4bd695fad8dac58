package llm_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/llm"
	"github.com/starplan/starplan/llm/llmtest"
)

func env(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

func TestConfigFromEnvDefaults(t *testing.T) {
	for _, vars := range []map[string]string{nil, {llm.EnvBaseURL: "  ", llm.EnvModel: ""}} {
		cfg := llm.ConfigFromEnv(env(vars))
		assert.Equal(t, llm.Config{
			BaseURL:    llm.DefaultBaseURL,
			Model:      llm.DefaultModel,
			Timeout:    llm.DefaultTimeout,
			MaxRetries: llm.DefaultMaxRetries,
			MaxReply:   llm.DefaultMaxReply,
		}, cfg)
	}
}

func TestConfigFromEnvPrecedence(t *testing.T) {
	cfg := llm.ConfigFromEnv(env(map[string]string{
		llm.EnvAPIKey:  " sk-test\n",
		llm.EnvBaseURL: "http://localhost:11434/v1",
		llm.EnvModel:   "qwen2.5-coder:7b",
	}))
	assert.Equal(t, "sk-test", cfg.APIKey)
	assert.Equal(t, "http://localhost:11434/v1", cfg.BaseURL)
	assert.Equal(t, "qwen2.5-coder:7b", cfg.Model, "the environment overrides the default")

	cfg.Model = "llama3.2" // a --model flag is applied after the environment
	c, err := llm.New(cfg)
	require.NoError(t, err)
	assert.Equal(t, "llama3.2", c.Model())
	assert.Equal(t, "http://localhost:11434/v1", c.BaseURL())
}

func TestNewMissingKeyForOpenAI(t *testing.T) {
	for _, base := range []string{"", llm.DefaultBaseURL, "https://API.openai.com/v1/"} {
		_, err := llm.New(llm.Config{BaseURL: base})
		var ce *llm.ConfigError
		require.ErrorAs(t, err, &ce, "base %q", base)
		assert.Equal(t, llm.EnvAPIKey, ce.Field)
		msg := err.Error()
		assert.Contains(t, msg, "set OPENAI_API_KEY")
		assert.Contains(t, msg, "OPENAI_BASE_URL")
		assert.Contains(t, msg, "http://localhost:11434/v1")
		assert.Contains(t, msg, "STARPLAN_MODEL")
		assert.NotContains(t, msg, "\n", "one paragraph")
	}
}

func TestNewAllowsNoKeyForOtherServers(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply("ok"))
	cfg := srv.Config()
	cfg.APIKey = ""
	c, err := llm.New(cfg)
	require.NoError(t, err)
	_, err = c.Complete(t.Context(), question)
	require.NoError(t, err)
	assert.Empty(t, srv.Requests()[0].APIKey)
	assert.Empty(t, srv.Requests()[0].Header.Get("Authorization"))
}

func TestNewRejectsBadBaseURL(t *testing.T) {
	for _, base := range []string{"localhost:11434", "ftp://example.com/v1", "http://", "::"} {
		_, err := llm.New(llm.Config{APIKey: "k", BaseURL: base})
		var ce *llm.ConfigError
		require.ErrorAs(t, err, &ce, "base %q", base)
		assert.Equal(t, llm.EnvBaseURL, ce.Field)
		assert.Contains(t, err.Error(), "set OPENAI_BASE_URL")
	}
}

func TestNewDefaults(t *testing.T) {
	c, err := llm.New(llm.Config{APIKey: "k", BaseURL: "http://localhost:8080/v1/", Model: " "})
	require.NoError(t, err)
	assert.Equal(t, llm.DefaultModel, c.Model())
	assert.Equal(t, "http://localhost:8080/v1", c.BaseURL())
}
