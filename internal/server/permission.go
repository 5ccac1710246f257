package server

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/oapi-codegen/runtime"
	"go.yaml.in/yaml/v3"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/fault"
)

// OperationPermission is what an operation of the contract declares about who may
// call it: x-contextd-permission (public, read, edit or admin) and
// x-contextd-creates-project, which says the operation creates its
// {project} when it is missing.
type OperationPermission struct {
	OperationID    string
	Need           string // public, read, edit or admin
	CreatesProject bool
	// Project reports whether the path holds a {project} parameter, which
	// is then checked (scope, existence, permission) before the handler.
	Project bool
}

// needs maps the contract's permission words to the agents' permissions.
var needs = map[string]auth.Permission{"read": auth.ReadOnly, "edit": auth.Edit, "admin": auth.Admin}

// specMethods are the keys of an OpenAPI path item that are operations.
var specMethods = map[string]bool{"get": true, "put": true, "post": true, "delete": true, "patch": true, "head": true, "options": true, "trace": true}

// specParam is a path template parameter; Echo spells {x} as :x.
var specParam = regexp.MustCompile(`\{([^}/]+)\}`)

// EchoPath is an OpenAPI path template as Echo routes it: {x} as :x, and
// a colon inside a segment (items:import, a custom method in the style of
// Google's API guide) escaped as \: so Echo reads it as a literal.
func EchoPath(path string) string {
	return specParam.ReplaceAllString(escapeColons(path), ":$1")
}

// escapeColons escapes every ":" that does not begin a path segment.
func escapeColons(path string) string {
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		if path[i] == ':' && i > 0 && path[i-1] != '/' && path[i-1] != '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(path[i])
	}
	return b.String()
}

// Router is e as the generated RegisterHandlers should see it: every
// route registered with its colons escaped (colonRouter).
func Router(e *echo.Echo) api.EchoRouter { return colonRouter{e} }

// colonRouter registers the generated routes with their colons escaped
// (see EchoPath): oapi-codegen writes a custom method's path as it is in
// the contract, where Echo would take ":import" for a parameter.
type colonRouter struct{ *echo.Echo }

func (r colonRouter) GET(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return r.Echo.GET(escapeColons(path), h, m...)
}

func (r colonRouter) POST(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return r.Echo.POST(escapeColons(path), h, m...)
}

func (r colonRouter) PUT(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return r.Echo.PUT(escapeColons(path), h, m...)
}

func (r colonRouter) PATCH(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return r.Echo.PATCH(escapeColons(path), h, m...)
}

func (r colonRouter) DELETE(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	return r.Echo.DELETE(escapeColons(path), h, m...)
}

// Permissions reads what every operation of spec (an OpenAPI document,
// api.Spec in production) declares, keyed by its Echo route as c.Path()
// gives it after routing ("GET /v1/projects/:project/items"). It refuses a
// spec in which any operation lacks a valid declaration, so a server cannot
// start with an operation nobody decided the permission of.
func Permissions(spec []byte) (map[string]OperationPermission, error) {
	var doc struct {
		Paths map[string]map[string]yaml.Node `yaml:"paths"`
	}
	if err := yaml.Unmarshal(spec, &doc); err != nil {
		return nil, fmt.Errorf("parse the contract: %w", err)
	}
	out := map[string]OperationPermission{}
	var errs []string
	for path, item := range doc.Paths {
		for method, node := range item {
			if !specMethods[method] {
				continue
			}
			var op struct {
				OperationID    string `yaml:"operationId"`
				Need           string `yaml:"x-contextd-permission"`
				CreatesProject bool   `yaml:"x-contextd-creates-project"`
			}
			if err := node.Decode(&op); err != nil {
				errs = append(errs, fmt.Sprintf("%s %s: %v", strings.ToUpper(method), path, err))
				continue
			}
			p := OperationPermission{OperationID: op.OperationID, Need: op.Need, CreatesProject: op.CreatesProject, Project: strings.Contains(path, "{project}")}
			if err := p.check(path); err != nil {
				errs = append(errs, fmt.Sprintf("%s %s: %v", strings.ToUpper(method), path, err))
				continue
			}
			out[strings.ToUpper(method)+" "+EchoPath(path)] = p
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return nil, fmt.Errorf("the contract's permissions are incomplete:\n%s", strings.Join(errs, "\n"))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the contract has no operations")
	}
	return out, nil
}

// check refuses declarations the middleware could not enforce as written:
// authenticate demands a key on /v1 and nowhere else, so public and /v1 must
// not meet, and only a path with a project can create it.
func (p OperationPermission) check(path string) error {
	v1 := strings.HasPrefix(path, "/v1/")
	switch _, known := needs[p.Need]; {
	case p.Need == "public" && v1:
		return fmt.Errorf("x-contextd-permission is public, but every /v1 call needs a key")
	case p.Need == "public":
	case !known:
		return fmt.Errorf("x-contextd-permission is %q; want public, read, edit or admin", p.Need)
	case !v1:
		return fmt.Errorf("x-contextd-permission is %s, but only /v1 paths are authenticated", p.Need)
	}
	if p.CreatesProject && (!p.Project || p.Need == "public") {
		return fmt.Errorf("x-contextd-creates-project needs a {project} path and a permission to create it with")
	}
	return nil
}

// mustPermissions is Permissions for a spec that is part of the binary: a
// contract without a complete declaration is a build mistake, so New panics.
func mustPermissions(spec []byte) map[string]OperationPermission {
	perms, err := Permissions(spec)
	if err != nil {
		panic(err)
	}
	return perms
}

// requirePermission enforces each operation's declared permission before
// its handler runs, so no handler can forget it. On a route with a project
// the project comes first (scope, then existence: 404), then the permission
// (403), which keeps the foundation's order. Rules about single objects
// (roles, _shared items, a handoff's target role or source agent) stay in
// the services. Routes the contract does not know (Echo's 404 and 405,
// /openapi.yaml) pass through, as do path values the generated wrapper will
// refuse with 400.
func (s *Server) requirePermission(spec []byte) echo.MiddlewareFunc {
	perms := mustPermissions(spec)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p, ok := perms[c.Request().Method+" "+c.Path()]
			if !ok || p.Need == "public" {
				return next(c)
			}
			ctx := c.Request().Context()
			agent := agentFrom(ctx)
			if agent == nil {
				// Permissions admits non-public operations only under /v1,
				// which authenticate guards; this is defence in depth.
				return fmt.Errorf("%w: a key is required", fault.ErrUnauthenticated)
			}
			need := needs[p.Need]
			if !p.Project {
				if !holds(agent, need) {
					return fmt.Errorf("%w: %s permission needed", fault.ErrForbidden, p.Need)
				}
				return next(c)
			}
			proj, ok := projectParam(c)
			if !ok {
				return next(c)
			}
			// Creating a project: a caller that may create it in its scope
			// is let through whether or not it exists yet; anyone else
			// learns nothing more than on any other route (404, then 403).
			if p.CreatesProject && agent.InScope(proj) && agent.Can(proj, need) {
				return next(c)
			}
			// The one decision of the request: the services it calls trust
			// it for what it covers (project.AuthorizeRequest).
			ctx, err := s.projects.AuthorizeRequest(ctx, agent, proj, need)
			if err != nil {
				return err
			}
			c.SetRequest(c.Request().WithContext(ctx))
			return next(c)
		}
	}
}

// holds reports whether the agent's permission is at least p on a route
// that names no project, where scope does not apply.
func holds(a *auth.Agent, p auth.Permission) bool {
	switch p {
	case auth.Admin:
		return a.IsAdmin()
	case auth.Edit:
		return a.IsAdmin() || a.Permission == auth.Edit
	}
	return true
}

// projectParam decodes the {project} path value exactly as the generated
// wrapper does, so the project checked here is the one the handler gets.
func projectParam(c echo.Context) (string, bool) {
	var proj string
	err := runtime.BindStyledParameterWithOptions("simple", "project", c.Param("project"), &proj, runtime.BindStyledParameterOptions{
		ParamLocation: runtime.ParamLocationPath, Required: true, Type: "string", ValueIsUnescaped: c.Request().URL.RawPath == "",
	})
	return proj, err == nil
}
