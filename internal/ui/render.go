package ui

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/fault"
)

// pageNames are the templates that are whole pages (each with the layout);
// fragments are rendered without it.
var (
	pageNames     = []string{"login", "index", "project", "packet", "item", "task", "ledger", "error"}
	fragmentNames = []string{"record"}
)

var funcs = template.FuncMap{
	// path joins escaped segments under the explorer: path "projects" p "items" k.
	"path": func(segs ...string) string {
		var b strings.Builder
		b.WriteString(Prefix)
		for _, s := range segs {
			b.WriteByte('/')
			b.WriteString(url.PathEscape(s))
		}
		return b.String()
	},
	"time": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"agent": agentHTML,
	"day":   func(t time.Time) string { return t.UTC().Format("2006-01-02") },
	"add":   func(a, b int) int { return a + b },
	"pct":   func(a, b int) string { return percent(a, b) },
	"join":  strings.Join,
}

func percent(a, b int) string {
	if b <= 0 {
		return "0%"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(a)/float64(b))
}

func parsePages() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, n := range pageNames {
		out[n] = template.Must(template.New(n).Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+n+".html"))
	}
	for _, n := range fragmentNames {
		out[n] = template.Must(template.New(n).Funcs(funcs).ParseFS(files, "templates/"+n+".html"))
	}
	return out
}

// view is what every page's layout reads.
type view struct {
	Title string
	Agent *auth.Agent // nil on the sign-in page
	CSRF  string
	// Project is the project the page is in, for the breadcrumbs.
	Project string
	// Agents are the names of the agents the page shows, by id (the agent
	// template function).
	Agents map[string]string
	Data   any
}

// render writes a whole page: the layout around template name.
func (h *handler) render(c echo.Context, status int, name, title, project string, data any) error {
	v := view{Title: title, Project: project, Data: data, Agents: agentsOf(c)}
	if s := sessionOf(c); s != nil {
		v.Agent, v.CSRF = s.Agent, s.CSRF
	}
	return h.write(c, status, name, "layout", v)
}

// agentsKey is where a page's handler leaves the names of the agents the
// page shows (nameAgents), for render.
const agentsKey = "ui.agents"

// nameAgents reads the names of the agents of ids, which the page about to
// be rendered shows.
func (h *handler) nameAgents(c echo.Context, ids ...string) error {
	var known []string
	for _, id := range ids {
		if id != "" {
			known = append(known, id)
		}
	}
	names, err := h.app.Agents.Names(c.Request().Context(), known)
	if err != nil {
		return err
	}
	c.Set(agentsKey, names)
	return nil
}

func agentsOf(c echo.Context) map[string]string {
	names, _ := c.Get(agentsKey).(map[string]string)
	return names
}

// agentHTML shows an agent by name, its id in the title (a hover, or a
// screen reader, tells which agent it is); an agent whose name another
// agent on the page shares shows its id too, and one of no known name
// shows its id.
func agentHTML(names map[string]string, id string) template.HTML {
	esc := template.HTMLEscapeString
	name, ok := names[id]
	if !ok || name == "" {
		return template.HTML(`<code class="agent">` + esc(id) + `</code>`)
	}
	shown := esc(name)
	for other, n := range names {
		if n == name && other != id {
			shown += ` (<code>` + esc(id) + `</code>)`
			break
		}
	}
	return template.HTML(`<span class="agent" title="` + esc(id) + `">` + shown + `</span>`)
}

// fragment writes a template without the layout (what a click loads).
func (h *handler) fragment(c echo.Context, name string, data any) error {
	return h.write(c, http.StatusOK, name, name, data)
}

func (h *handler) write(c echo.Context, status int, name, entry string, data any) error {
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, entry, data); err != nil {
		h.log.Error("ui: render", "template", name, "err", err)
		return c.String(http.StatusInternalServerError, "the page could not be rendered")
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// failure is what the error page shows.
type failure struct {
	Status  int
	Message string
}

// fail answers an error with the error page, mapping the kinds of package
// fault as the API does (a thing the agent may not see is not found).
func (h *handler) fail(c echo.Context, err error) error {
	status := statusOf(err)
	msg := err.Error()
	if status == http.StatusInternalServerError {
		h.log.Error("ui: request failed", "path", c.Request().URL.Path, "err", err)
		msg = "something went wrong on the server; the log has the details"
	}
	return h.render(c, status, "error", http.StatusText(status), "", failure{Status: status, Message: msg})
}

func statusOf(err error) int {
	switch {
	case errors.Is(err, fault.ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, fault.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, fault.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, fault.ErrGone):
		return http.StatusGone
	case errors.Is(err, fault.ErrInvalid), errors.Is(err, fault.ErrMalformed):
		return http.StatusUnprocessableEntity
	case errors.Is(err, fault.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, fault.ErrRateLimited):
		return http.StatusTooManyRequests
	case errors.Is(err, fault.ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return he.Code
	}
	return http.StatusInternalServerError
}
