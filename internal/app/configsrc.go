package app

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/contextd/contextd/internal/limits"
	"github.com/contextd/contextd/internal/obs"
)

// Where a setting comes from, highest precedence first: the command line,
// the environment, the config file, the default.
const (
	FromFlag    = "flag"
	FromEnv     = "env"
	FromFile    = "file"
	FromDefault = "default"
)

// auditKeySetting is the file key of the audit key itself, which has no
// flag (a flag would show it in the process list): CONTEXTD_AUDIT_KEY or
// the file.
const auditKeySetting = "audit-key"

// envName is a setting's environment variable: CONTEXTD_ and the flag's
// name in capitals, except the database's, which keeps the usual name.
func envName(flag string) string {
	if flag == "database-url" {
		return "DATABASE_URL"
	}
	return "CONTEXTD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// resolve sets every flag the command line left unset from its variable,
// else from the config file, once, and reads the audit key and the OTEL
// variables. A Config not made by RegisterFlags (tests) is left as it is.
func (c *Config) resolve() []error {
	if c.fs == nil || c.resolved {
		return nil
	}
	c.resolved = true
	c.source = map[string]string{}
	c.Traces = obs.TraceSettingsFromEnv(os.Getenv) // read whatever else fails
	var errs []error
	if f := c.fs.Lookup("config"); f != nil && !f.Changed {
		if v := os.Getenv(envName("config")); v != "" {
			c.ConfigFile = v
		}
	}
	file, err := readConfigFile(c.ConfigFile)
	if err != nil {
		return []error{fmt.Errorf("--config: %w", err)}
	}
	for key := range file {
		if key != auditKeySetting && (c.fs.Lookup(key) == nil || key == "config" || key == "help") {
			errs = append(errs, fmt.Errorf("--config %s: no setting named %q", c.ConfigFile, key))
		}
	}
	c.fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" {
			errs = append(errs, c.resolveFlag(f, file)...)
		}
	})
	c.source[auditKeySetting] = FromDefault
	if v := os.Getenv("CONTEXTD_AUDIT_KEY"); v != "" {
		c.AuditKey, c.source[auditKeySetting] = v, FromEnv+" CONTEXTD_AUDIT_KEY"
	} else if v, ok := file[auditKeySetting]; ok {
		c.AuditKey, c.source[auditKeySetting] = fmt.Sprint(v), FromFile
	}
	return errs
}

// resolveFlag fills one flag from its variable or the file, unless the
// command line set it.
func (c *Config) resolveFlag(f *pflag.Flag, file map[string]any) []error {
	switch {
	case f.Changed:
		c.source[f.Name] = FromFlag
		return nil
	case f.Name == "config":
		c.source[f.Name] = FromDefault
		if c.ConfigFile != "" {
			c.source[f.Name] = FromEnv + " " + envName(f.Name)
		}
		return nil
	}
	if name := envName(f.Name); os.Getenv(name) != "" {
		c.source[f.Name] = FromEnv + " " + name
		if err := c.fs.Set(f.Name, os.Getenv(name)); err != nil {
			return []error{fmt.Errorf("%s: %q is not a valid --%s: %w", name, os.Getenv(name), f.Name, unwrapFlagErr(err))}
		}
		return nil
	}
	v, ok := file[f.Name]
	if !ok {
		c.source[f.Name] = FromDefault
		return nil
	}
	c.source[f.Name] = FromFile
	values, err := fileValues(v)
	if err != nil {
		return []error{fmt.Errorf("--config %s: %s: %w", c.ConfigFile, f.Name, err)}
	}
	var errs []error
	for _, s := range values {
		if err := c.fs.Set(f.Name, s); err != nil {
			errs = append(errs, fmt.Errorf("--config %s: %s: %q: %w", c.ConfigFile, f.Name, s, unwrapFlagErr(err)))
		}
	}
	return errs
}

// unwrapFlagErr is the parse error under pflag's wording.
func unwrapFlagErr(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

// fileValues are a file value as flag arguments: a scalar as it is, a map
// (the limits) as name=value each, in name order.
func fileValues(v any) ([]string, error) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make([]string, len(keys))
		for i, k := range keys {
			out[i] = k + "=" + fmt.Sprint(v[k])
		}
		return out, nil
	case []any, nil:
		return nil, errors.New("must be a single value")
	}
	return []string{fmt.Sprint(v)}, nil
}

// readConfigFile reads a YAML or TOML file by its extension; "" is none.
func readConfigFile(path string) (map[string]any, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		if err := yaml.Unmarshal(b, &out); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	case ".toml":
		if err := toml.Unmarshal(b, &out); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	default:
		return nil, fmt.Errorf("%s: not .yaml, .yml or .toml", path)
	}
	return out, nil
}

// checkDatabaseURL refuses a postgres:// URL that does not parse (a
// key=value connection string is left to the driver).
func checkDatabaseURL(s string) error {
	if !strings.Contains(s, "://") {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("not a URL: %v", errors.Unwrap(err))
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return fmt.Errorf("the scheme must be postgres or postgresql, not %q", u.Scheme)
	}
	return nil
}

// Masked is the mask of a secret in the effective configuration.
const Masked = "***"

var dsnPassword = regexp.MustCompile(`(?i)((?:ssl)?password\s*=\s*)('[^']*'|\S+)`)

// MaskURL is a database URL with its password masked,
// postgres://user:***@host/db, a password=... query parameter or
// key=value pair too.
func MaskURL(s string) string {
	if !strings.Contains(s, "://") {
		return dsnPassword.ReplaceAllString(s, "${1}"+Masked)
	}
	u, err := url.Parse(s)
	if err != nil {
		return Masked // cannot tell where its password is
	}
	q := u.Query()
	masked := false
	for _, secret := range []string{"password", "sslpassword"} {
		if q.Has(secret) {
			q.Set(secret, "MASKED")
			masked = true
		}
	}
	if masked {
		u.RawQuery = strings.ReplaceAll(q.Encode(), "MASKED", Masked)
	}
	if _, has := u.User.Password(); !has {
		return u.String()
	}
	user := url.User(u.User.Username()).String()
	u.User = nil
	rest := strings.TrimPrefix(u.String(), u.Scheme+"://")
	return u.Scheme + "://" + user + ":" + Masked + "@" + rest
}

// secretURLs are the settings whose passwords config check masks (the
// audit key it masks whole).
var secretURLs = []string{"database-url", "migrate-database-url", "read-database-url"}

// WriteEffective writes the effective configuration as a YAML file of
// settings (which --config reads back), each with where it came from, the
// secrets masked, and the OTEL variables of the traces after it. Call it
// after Validate.
func (c *Config) WriteEffective(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString("# contextd effective configuration: flags > environment > file > defaults\n")
	var flags []*pflag.Flag
	c.fs.VisitAll(func(f *pflag.Flag) { flags = append(flags, f) })
	fmt.Fprintf(&b, "# config: %s (%s)\n", strconv.Quote(c.ConfigFile), c.source["config"])
	for _, f := range flags {
		if f.Name == "limit" || f.Name == "help" || f.Name == "config" {
			continue
		}
		val := f.Value.String()
		if slices.Contains(secretURLs, f.Name) {
			val = MaskURL(val)
		}
		fmt.Fprintf(&b, "%s: %s # %s\n", f.Name, strconv.Quote(val), c.source[f.Name])
	}
	key := ""
	if c.AuditKey != "" {
		key = Masked
	}
	fmt.Fprintf(&b, "%s: %s # %s\n", auditKeySetting, strconv.Quote(key), c.source[auditKeySetting])
	fmt.Fprintf(&b, "limit: # %s\n", c.source["limit"])
	for _, n := range limits.Names() {
		fmt.Fprintf(&b, "  %s: %d\n", n, c.Limits.Value(n))
	}
	b.WriteString("# traces (OpenTelemetry, from the environment):\n")
	endpoint := c.Traces.Endpoint
	if endpoint == "" {
		endpoint = "(none: traces off)"
	}
	fmt.Fprintf(&b, "#   endpoint: %s\n#   protocol: %s\n", MaskURL(endpoint), c.Traces.Protocol)
	if h := os.Getenv("OTEL_EXPORTER_OTLP_HEADERS"); h != "" {
		fmt.Fprintf(&b, "#   headers: %s\n", maskHeaders(h))
	}
	_, err := w.Write(b.Bytes())
	return err
}

// maskHeaders keeps the names of OTEL_EXPORTER_OTLP_HEADERS (k=v,...) and
// masks their values, which are typically credentials.
func maskHeaders(h string) string {
	parts := strings.Split(h, ",")
	for i, p := range parts {
		name, _, _ := strings.Cut(p, "=")
		parts[i] = strings.TrimSpace(name) + "=" + Masked
	}
	return strings.Join(parts, ",")
}
