package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
	"github.com/contextd/contextd/internal/app"
)

// defaultURL is the server a client command calls when nothing names one:
// `make run`'s.
const defaultURL = "http://127.0.0.1:8080"

// clientFlags say where the server is and who calls it, for every client
// command alike. Each setting is taken from the first that gives it: the
// flag, the environment (CONTEXTD_URL, CONTEXTD_KEY, CONTEXTD_PROJECT),
// the client config file, then the default (the local server; the
// embedded default's .contextd/admin.key).
type clientFlags struct {
	url, key, project string
	// config is --client-config: the client config file.
	config string
	// json prints the API's answer as JSON instead of the readable text.
	json bool
	// timeout bounds each request (0: 30 s); an import's batches may take
	// longer on a loaded server.
	timeout  time.Duration
	resolved bool
}

// clientConfig is the client config file (TOML): where the server is and
// who calls it, so that neither has to be typed. Its key goes only to its
// own url.
type clientConfig struct {
	URL string `toml:"url"`
	// Key is an API key; KeyFile names a file that holds one (relative to
	// the config file's directory), so the config need not hold a secret.
	Key     string `toml:"key"`
	KeyFile string `toml:"key_file"`
	Project string `toml:"project"`
}

func (f *clientFlags) register(cmd *cobra.Command) {
	f.registerWith(cmd, "project (env CONTEXTD_PROJECT, client config's project); if empty, every project you may see is searched")
}

func (f *clientFlags) registerWith(cmd *cobra.Command, projectHelp string) {
	f.registerServer(cmd)
	cmd.Flags().StringVar(&f.project, "project", "", projectHelp)
}

// registerServer declares --url, --key and --client-config alone, for
// commands of no project.
func (f *clientFlags) registerServer(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.url, "url", "", "server URL (env CONTEXTD_URL, client config's url; default "+defaultURL+")")
	cmd.Flags().StringVar(&f.key, "key", "", "API key (env CONTEXTD_KEY, client config's key or key_file; default: the embedded default's .contextd/admin.key)")
	cmd.Flags().StringVar(&f.config, "client-config", "", "client config file (env CONTEXTD_CLIENT_CONFIG; default $XDG_CONFIG_HOME/contextd/client.toml)")
}

// registerJSON declares --json, for commands that print an answer.
func (f *clientFlags) registerJSON(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.json, "json", false, "print the API's answer as JSON")
}

// needProject resolves the settings and is the error of a command that
// needs a project without one.
func (f *clientFlags) needProject() error {
	if err := f.resolve(); err != nil {
		return err
	}
	if f.project == "" {
		return errors.New("--project is required (or set CONTEXTD_PROJECT, or project in the client config)")
	}
	return nil
}

// resolve fills url, key and project from the flag, the environment, the
// client config and the defaults, in that order.
func (f *clientFlags) resolve() error {
	if f.resolved {
		return nil
	}
	cfg, path, err := loadClientConfig(f.config)
	if err != nil {
		return err
	}
	f.url = first(f.url, os.Getenv("CONTEXTD_URL"), cfg.URL, defaultURL)
	f.project = first(f.project, os.Getenv("CONTEXTD_PROJECT"), cfg.Project)
	f.key = first(f.key, os.Getenv("CONTEXTD_KEY"))
	// The file's key is for the file's server: a --url or CONTEXTD_URL of
	// another server does not get it.
	if f.key == "" && (cfg.URL == "" || sameURL(cfg.URL, f.url)) {
		if f.key, err = cfg.secret(path); err != nil {
			return err
		}
	}
	if f.key == "" && loopback(f.url) {
		// The embedded default keeps its first admin's key in its data
		// directory (serve writes it, 0600). It is the key of a server on
		// this machine: a --url, CONTEXTD_URL or config url of another
		// host never gets it.
		keyPath := filepath.Join(app.EnvOr("CONTEXTD_DATA_DIR", ".contextd"), "admin.key")
		if b, err := os.ReadFile(keyPath); err == nil {
			f.key = strings.TrimSpace(string(b))
		}
	}
	f.resolved = true
	return nil
}

func (f *clientFlags) client() (*client, error) {
	if err := f.resolve(); err != nil {
		return nil, err
	}
	if f.key == "" {
		return nil, errors.New("no API key: pass --key, set CONTEXTD_KEY, put key_file in the client config, or run where the embedded default keeps .contextd/admin.key")
	}
	timeout := f.timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	c, err := apiclient.New(f.url, f.key, apiclient.WithHTTPClient(&http.Client{Timeout: timeout}))
	if err != nil {
		return nil, err
	}
	return &client{Client: c, key: f.key}, nil
}

// named reports whether a server was named by --url, CONTEXTD_URL or the
// client config (not the default).
func (f *clientFlags) named() (bool, error) {
	if f.url != "" || os.Getenv("CONTEXTD_URL") != "" {
		return true, nil
	}
	cfg, _, err := loadClientConfig(f.config)
	return cfg.URL != "", err
}

func first(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// loopback reports whether a URL names a server on this machine's
// loopback interface, where the embedded default listens.
func loopback(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.User != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func sameURL(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}

// clientConfigPath is the client config file: --client-config, else
// CONTEXTD_CLIENT_CONFIG, else contextd/client.toml in the user's config
// directory; explicit reports whether it was named (a named file must
// exist).
func clientConfigPath(flag string) (path string, explicit bool) {
	if p := first(flag, os.Getenv("CONTEXTD_CLIENT_CONFIG")); p != "" {
		return p, true
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", false
	}
	return filepath.Join(dir, "contextd", "client.toml"), false
}

// loadClientConfig reads the client config file; no file is an empty
// config unless it was named.
func loadClientConfig(flag string) (clientConfig, string, error) {
	var cfg clientConfig
	path, explicit := clientConfigPath(flag)
	if path == "" {
		return cfg, "", nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return cfg, "", nil
	}
	if err != nil {
		return cfg, "", fmt.Errorf("client config: %w", err)
	}
	dec := toml.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return cfg, "", fmt.Errorf("client config %s: %w (it takes url, key, key_file and project)", path, err)
	}
	if cfg.Key != "" && cfg.KeyFile != "" {
		return cfg, "", fmt.Errorf("client config %s: key or key_file, not both", path)
	}
	if cfg.Key != "" {
		if err := private(path); err != nil {
			return cfg, "", err
		}
	}
	return cfg, path, nil
}

// secret is the config's key: key, or the content of key_file.
func (c clientConfig) secret(configPath string) (string, error) {
	if c.KeyFile == "" {
		return c.Key, nil
	}
	p := c.KeyFile
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("client config %s: key_file: %w", configPath, err)
		}
		p = filepath.Join(home, rest)
	} else if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(configPath), p)
	}
	if err := private(p); err != nil {
		return "", err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("client config %s: key_file: %w", configPath, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// private refuses a file holding a key that others may read, as ssh
// refuses such a private key: whoever can read it can act as its agent.
func private(path string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s holds an API key and others may read it (mode %04o): chmod 600 %s", path, st.Mode().Perm(), path)
	}
	return nil
}
