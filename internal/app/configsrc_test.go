package app_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
)

const testKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

// Flags override the environment, which overrides the file, which
// overrides the defaults; YAML and TOML read alike.
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	yml := filepath.Join(dir, "c.yaml")
	require.NoError(t, os.WriteFile(yml, []byte("listen: 127.0.0.1:9001\nrate-limit: 3\nrate-burst: 4\nlog-format: json\nlimit:\n  content: 2048\n"), 0o600))
	tml := filepath.Join(dir, "c.toml")
	require.NoError(t, os.WriteFile(tml, []byte("listen = \"127.0.0.1:9001\"\nrate-limit = 3\nrate-burst = 4\nlog-format = \"json\"\n[limit]\ncontent = 2048\n"), 0o600))
	t.Setenv("CONTEXTD_RATE_LIMIT", "5")
	t.Setenv("CONTEXTD_RATE_BURST", "6")
	for _, file := range []string{yml, tml} {
		c, err := parse(t, "--config", file, "--rate-burst=9")
		require.NoError(t, err, file)
		require.Equal(t, "127.0.0.1:9001", c.Listen, "from the file")
		require.Equal(t, "json", c.LogFormat, "from the file")
		require.Equal(t, 2048, c.Limits.Content, "from the file")
		require.Equal(t, 5.0, c.RateLimit, "the environment over the file")
		require.Equal(t, 9, c.RateBurst, "the flag over both")
		require.Equal(t, app.DefaultBodyLimit, int(c.BodyLimit), "the default")
	}
	t.Setenv("CONTEXTD_CONFIG", yml)
	c, err := parse(t)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9001", c.Listen, "the file named by CONTEXTD_CONFIG")
}

// config check masks passwords in URLs and keys, whatever they came from.
func TestConfigMasksSecrets(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(file, []byte("migrate-database-url: postgres://owner:hunter2@db:5432/contextd\n"), 0o600))
	t.Setenv("DATABASE_URL", "postgres://app:s3cret-pw@db.example:5432/contextd?sslmode=disable")
	t.Setenv("CONTEXTD_READ_DATABASE_URL", "postgres://app:st4ndby-pw@standby.example:5432/contextd")
	t.Setenv("CONTEXTD_AUDIT_KEY", testKey)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector.example:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer tok-123")
	c, err := parse(t, "--config", file)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, c.WriteEffective(&out))
	s := out.String()
	for _, secret := range []string{"s3cret-pw", "st4ndby-pw", "hunter2", testKey, "tok-123"} {
		require.NotContains(t, s, secret)
	}
	require.Contains(t, s, `database-url: "postgres://app:***@db.example:5432/contextd?sslmode=disable" # env DATABASE_URL`)
	require.Contains(t, s, `migrate-database-url: "postgres://owner:***@db:5432/contextd" # file`)
	require.Contains(t, s, `read-database-url: "postgres://app:***@standby.example:5432/contextd" # env CONTEXTD_READ_DATABASE_URL`)
	require.Equal(t, "postgres://app:st4ndby-pw@standby.example:5432/contextd", c.ReadDatabaseURL)
	require.Contains(t, s, `audit-key: "***" # env CONTEXTD_AUDIT_KEY`)
	require.Contains(t, s, "authorization=***")
	require.Contains(t, s, "endpoint: https://collector.example:4318")
}

func TestMaskURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://user:pw@host/db":                  "postgres://user:***@host/db",
		"postgres://user@host/db":                     "postgres://user@host/db",
		"postgres://host/db?user=u&password=pw":       "postgres://host/db?password=***&user=u",
		"host=db user=u password=secret dbname=x":     "host=db user=u password=*** dbname=x",
		"postgresql://u:p%40ss@h:5432/d?sslmode=none": "postgresql://u:***@h:5432/d?sslmode=none",
		"postgres://u:pw1@h/x?sslpassword=sslsecret":  "postgres://u:***@h/x?sslpassword=***",
		"host=db sslpassword=s3 dbname=x":             "host=db sslpassword=*** dbname=x",
		"":                                            "",
	} {
		require.Equal(t, want, app.MaskURL(in), in)
	}
}

// An invalid setting fails naming it, wherever it came from.
func TestConfigInvalidSettings(t *testing.T) {
	dir := t.TempDir()
	badKey := filepath.Join(dir, "bad.key")
	require.NoError(t, os.WriteFile(badKey, []byte("not a key"), 0o600))
	unreadable := dir // a directory: reading it fails even as root, unlike a file of mode 000
	badFile := filepath.Join(dir, "c.yaml")
	require.NoError(t, os.WriteFile(badFile, []byte("rate-burst: many\n"), 0o600))
	unknown := filepath.Join(dir, "u.toml")
	require.NoError(t, os.WriteFile(unknown, []byte("lisen = \"x\"\n"), 0o600))
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unparsable listen", []string{"--listen=localhost"}, nil, "--listen"},
		{"bad port", []string{"--listen=127.0.0.1:http2"}, nil, "--listen"},
		{"unparsable metrics listen", []string{"--metrics-listen=::1"}, nil, "--metrics-listen"},
		{"negative limit", []string{"--limit=content=-1"}, nil, "--limit: limit content"},
		{"negative rate limit", []string{"--rate-limit=-1"}, nil, "--rate-limit"},
		{"negative pool", []string{"--db-max-conns=-1"}, nil, "--db-max-conns"},
		{"missing key file", []string{"--audit-key-file", filepath.Join(dir, "none")}, nil, "--audit-key-file"},
		{"unreadable key file", []string{"--audit-key-file", unreadable}, nil, "--audit-key-file"},
		{"malformed key file", []string{"--audit-key-file", badKey}, nil, "--audit-key-file"},
		{"malformed key", nil, map[string]string{"CONTEXTD_AUDIT_KEY": "nope"}, "CONTEXTD_AUDIT_KEY"},
		{"log format", []string{"--log-format=xml"}, nil, "--log-format"},
		{"log level", nil, map[string]string{"CONTEXTD_LOG_LEVEL": "loud"}, "--log-level"},
		{"env not a number", nil, map[string]string{"CONTEXTD_BODY_LIMIT": "big"}, "CONTEXTD_BODY_LIMIT"},
		{"database url", []string{"--database-url=mysql://x@y/z"}, nil, "--database-url"},
		{"read database url", []string{"--database-url=postgres://x@y/z", "--read-database-url=mysql://x@y/z"}, nil, "--read-database-url: the scheme"},
		{"read database without a database", []string{"--read-database-url=postgres://x@standby/z"}, nil, "--read-database-url: needs --database-url"},
		{"negative read wait", []string{"--read-wait=-1s"}, nil, "--read-wait"},
		{"file value", []string{"--config", badFile}, nil, "rate-burst"},
		{"file key", []string{"--config", unknown}, nil, `no setting named "lisen"`},
		{"missing file", []string{"--config", filepath.Join(dir, "none.yaml")}, nil, "--config"},
		{"otlp protocol", nil, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"metrics on the main listener's address", []string{"--listen=127.0.0.1:8080", "--metrics-listen=127.0.0.1:8080"}, nil, "--metrics-listen"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			_, err := parse(t, c.args...)
			require.ErrorContains(t, err, c.want)
			if c.env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "" {
				require.NotContains(t, err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL", "only the setting that is wrong is named")
			}
		})
	}
}
