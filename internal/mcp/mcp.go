// Package mcp serves the Model Context Protocol over streamable HTTP (at
// /mcp, see internal/server) with the official Go SDK. It is a transport,
// not a second implementation: every tool call and resource read becomes
// the matching operation of api/openapi.yaml, dispatched in-process through
// the very HTTP handler that serves the REST API, with the caller's own
// Authorization header. Authentication, scopes, permissions
// (x-contextd-permission), role visibility, validation, limits and
// problem+json therefore apply unchanged; a refused call comes back as an
// MCP tool error whose structuredContent is the problem document.
package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"
)

// Tool names a tool and the operation of the contract it is.
type Tool struct{ Name, OperationID string }

// Tools are the tools served, each an operation of the contract: its
// input schema is derived from the operation (Operations) and its call is
// the operation's.
var Tools = []Tool{
	{"assemble_packet", "assemblePacket"},
	{"why", "whyPacket"},
	{"attribute", "attributePacket"},
	{"get_packet", "getPacket"},
	{"put_item", "putItem"},
	{"get_item", "getItem"},
	{"search_items", "listItems"},
	{"list_handoffs", "listHandoffs"},
	{"get_handoff", "getHandoff"},
	{"create_handoff", "createHandoff"},
	{"accept_handoff", "acceptHandoff"},
	{"reject_handoff", "rejectHandoff"},
	{"withdraw_handoff", "withdrawHandoff"},
	{"task_history", "getTaskHistory"},
	{"record_outcome", "recordOutcome"},
	{"ablate", "ablatePacket"},
	{"suspects", "getSuspects"},
	{"list_proposals", "listProposals"},
	{"list_item_proposals", "listItemProposals"},
	{"get_proposal", "getItemProposal"},
	{"promote_proposal", "promoteProposal"},
	{"reject_proposal", "rejectProposal"},
	{"get_role_policy", "getRolePolicy"},
}

// Meta keys of a tool: the operation it is and the permission that
// operation declares (x-contextd-permission), which the dispatch enforces.
const (
	MetaOperation  = "contextd.dev/operation"
	MetaPermission = "contextd.dev/permission"
)

// The resource templates: a packet's rendered text and an item.
const (
	PacketTemplate = "contextd://projects/{project}/packets/{id}"
	ItemTemplate   = "contextd://projects/{project}/items/{key}"
)

// Config wires the MCP endpoint.
type Config struct {
	// Spec is the contract (api.Spec).
	Spec []byte
	// API serves the contract's operations (the server's Echo instance).
	API    http.Handler
	Logger *slog.Logger
}

const instructions = `contextd is a persistent context store. Assemble a packet (assemble_packet) before a prompt and use its rendered text; ask why (why) it did or did not contain an item, or which records a piece of text came from (attribute). Write items with put_item (with "proposal": true, a proposal another principal promotes: list_proposals, promote_proposal, reject_proposal), find them with search_items, hand work to another role with create_handoff. Every tool is an operation of contextd's REST API, with its arguments: path and query parameters and the request body's members side by side. Errors carry the problem document (code, detail, errors).`

// New returns the MCP endpoint. It is stateless (no session survives a
// request, so any process of a cluster can answer any request) and answers
// in JSON; every request needs a bearer key, which each call is made with.
func New(cfg Config) (http.Handler, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// The SDK logs every connection at info: in stateless mode, every request.
	cfg.Logger = slog.New(atLeast{cfg.Logger.Handler(), slog.LevelWarn})
	ops, err := Operations(cfg.Spec)
	if err != nil {
		return nil, err
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: "contextd", Title: "contextd", Version: specVersion(cfg.Spec)},
		&sdk.ServerOptions{Instructions: instructions, Logger: cfg.Logger, SetCacheable: private})
	d := &dispatcher{api: cfg.API}
	for _, t := range Tools {
		op, ok := ops[t.OperationID]
		if !ok {
			return nil, fmt.Errorf("tool %s: the contract has no operation %s", t.Name, t.OperationID)
		}
		srv.AddTool(toolOf(t.Name, op), d.tool(op))
	}
	for _, r := range []struct {
		op, kind, template, title, mime string
		contents                        func(uri string, body []byte) (*sdk.ResourceContents, error)
	}{
		{"getPacket", "packets", PacketTemplate, "A packet's rendered text", "text/markdown", packetContents},
		{"getItem", "items", ItemTemplate, "An item's latest version", "application/json", itemContents},
	} {
		op, ok := ops[r.op]
		if !ok {
			return nil, fmt.Errorf("resource %s: the contract has no operation %s", r.template, r.op)
		}
		srv.AddResourceTemplate(&sdk.ResourceTemplate{
			Name: strings.TrimSuffix(r.kind, "s"), Title: r.title, URITemplate: r.template, MIMEType: r.mime,
			Description: op.Summary + " (" + op.ID + "; percent-encode reserved characters in the URI's values)",
		}, d.resource(op, r.kind, r.contents))
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true, Logger: cfg.Logger,
		// DNS rebinding is met by Origin (Origins, checked by the server
		// before authentication) and by the agent key every request needs;
		// a contextd behind a reverse proxy on loopback must answer names
		// other than localhost.
		DisableLocalhostProtection: true,
		// The server's body limit bounds the request already.
		MaxRequestBodyBytes: -1,
	})
	return requireKey(jsonrpcErrors(h)), nil
}

// atLeast passes on the records of level min and above.
type atLeast struct {
	slog.Handler
	min slog.Level
}

func (h atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h atLeast) WithAttrs(attrs []slog.Attr) slog.Handler {
	return atLeast{h.Handler.WithAttrs(attrs), h.min}
}

func (h atLeast) WithGroup(name string) slog.Handler {
	return atLeast{h.Handler.WithGroup(name), h.min}
}

func specVersion(spec []byte) string {
	var doc struct {
		Info struct {
			Version string `yaml:"version"`
		} `yaml:"info"`
	}
	_ = yaml.Unmarshal(spec, &doc)
	return doc.Info.Version
}

// toolOf is the tool of an operation.
func toolOf(name string, op Operation) *sdk.Tool {
	readOnly := op.Method == http.MethodGet
	no := false
	return &sdk.Tool{
		Name:        name,
		Description: fmt.Sprintf("%s (%s: %s %s; needs %s permission)", op.Summary, op.ID, op.Method, op.Path, op.Permission),
		InputSchema: op.InputSchema,
		Annotations: &sdk.ToolAnnotations{
			ReadOnlyHint: readOnly, IdempotentHint: readOnly || op.Method == http.MethodPut,
			DestructiveHint: &no, OpenWorldHint: &no,
		},
		Meta: sdk.Meta{MetaOperation: op.ID, MetaPermission: op.Permission},
	}
}

// requireKey refuses a request without a bearer key, as the REST API does
// (internal/server authenticates /mcp before this runs; this is defence
// in depth).
func requireKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, key, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
			b, _ := json.Marshal(problem(http.StatusUnauthorized, "unauthenticated", "an Authorization: Bearer <key> header is required"))
			w.Header().Set("WWW-Authenticate", `Bearer realm="contextd"`)
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write(b)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// dispatcher makes calls to the REST API in-process.
type dispatcher struct{ api http.Handler }

// answer is an operation's answer: its status and JSON body.
type answer struct {
	status int
	body   []byte
}

func (a answer) ok() bool { return a.status >= 200 && a.status < 300 }

// tool is the handler of op's tool.
func (d *dispatcher) tool(op Operation) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		args := map[string]any{}
		if raw := req.Params.Arguments; len(bytes.TrimSpace(raw)) > 0 && string(raw) != "null" {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			if err := dec.Decode(&args); err != nil {
				return toolResult(problemAnswer(problem(400, "malformed", "the arguments must be a JSON object"))), nil
			}
		}
		return toolResult(d.call(ctx, op, args, header(req.Extra))), nil
	}
}

func header(extra *sdk.RequestExtra) http.Header {
	if extra == nil {
		return http.Header{}
	}
	return extra.Header
}

// toolResult is a tool's answer: the operation's JSON as structuredContent
// and as text; anything but 2xx a tool error with the problem's members.
func toolResult(a answer) *sdk.CallToolResult {
	res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(a.body)}}, IsError: !a.ok()}
	if t := bytes.TrimSpace(a.body); len(t) > 0 && t[0] == '{' && json.Valid(t) {
		res.StructuredContent = json.RawMessage(t)
	} else if res.IsError {
		res.StructuredContent = problem(a.status, "internal", "the operation answered "+http.StatusText(a.status))
	}
	return res
}

// call makes op's request from args, with the caller's Authorization
// header, and serves it with the API.
func (d *dispatcher) call(ctx context.Context, op Operation, args map[string]any, hdr http.Header) answer {
	r, p := request(ctx, op, args)
	if p != nil {
		return problemAnswer(p)
	}
	// The caller's key, its request id and its trace go with the call.
	for _, h := range []string{"Authorization", "X-Request-Id", "Traceparent", "Tracestate"} {
		if v := hdr.Get(h); v != "" {
			r.Header.Set(h, v)
		}
	}
	r.Header.Set("Accept", "application/json")
	rec := httptest.NewRecorder()
	d.api.ServeHTTP(rec, r)
	return answer{status: rec.Code, body: rec.Body.Bytes()}
}

// request is op's HTTP request: path parameters into the path, query
// parameters into the query, every other argument a member of the JSON
// body. A missing required parameter, or an argument an operation without
// a body has no place for, is refused here as the API would refuse it.
func request(ctx context.Context, op Operation, args map[string]any) (*http.Request, map[string]any) {
	path, query, rest := op.Path, url.Values{}, maps.Clone(args)
	var missing []map[string]string
	for _, p := range op.Params {
		v, given := rest[p.Name]
		delete(rest, p.Name)
		if !given || v == nil {
			if p.Required {
				missing = append(missing, map[string]string{"pointer": "", "parameter": p.Name, "code": "required", "detail": p.Name + " is required"})
			}
			continue
		}
		if p.In == "path" {
			path = strings.Replace(path, "{"+p.Name+"}", url.PathEscape(text(v)), 1)
		} else {
			query.Set(p.Name, text(v))
		}
	}
	if len(missing) > 0 {
		pr := problem(422, "validation_failed", "the request has invalid values; see errors")
		pr["errors"] = missing
		return nil, pr
	}
	var body io.Reader = http.NoBody
	switch {
	case op.HasBody && (len(rest) > 0 || op.BodyRequired):
		b, err := json.Marshal(rest)
		if err != nil {
			return nil, problem(400, "malformed", "the arguments cannot be sent as JSON")
		}
		body = bytes.NewReader(b)
	case !op.HasBody && len(rest) > 0:
		names := slices.Sorted(maps.Keys(rest))
		pr := problem(400, "malformed", fmt.Sprintf("unknown argument %q", names[0]))
		pr["errors"] = []map[string]string{{"pointer": "/" + names[0], "code": "unknown_field", "detail": fmt.Sprintf("unknown argument %q", names[0])}}
		return nil, pr
	}
	u := "http://contextd" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	r, err := http.NewRequestWithContext(ctx, op.Method, u, body)
	if err != nil {
		return nil, problem(400, "malformed", "the arguments do not make a request: "+err.Error())
	}
	if body != http.NoBody {
		r.Header.Set("Content-Type", "application/json")
	}
	return r, nil
}

// text is a parameter's value as the URL carries it.
func text(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		return fmt.Sprint(v)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// problem is an RFC 9457 document with the API's members, for what is
// refused before the API is called.
func problem(status int, code, detail string) map[string]any {
	return map[string]any{
		"type": "https://contextd.dev/problems/" + strings.ReplaceAll(code, "_", "-"), "title": http.StatusText(status),
		"status": status, "code": code, "detail": detail,
	}
}

func problemAnswer(p map[string]any) answer {
	b, _ := json.Marshal(p)
	status, _ := p["status"].(int)
	return answer{status: status, body: b}
}

// private marks every cacheable result as the caller's alone, never to be
// kept: what a key may see depends on its agent's role and projects, and
// items change (the SDK's default, "public", would let an intermediary
// serve one agent's answer to another).
func private(_ context.Context, _ sdk.Request, c *sdk.Cacheable) {
	c.TTLMs, c.CacheScope = 0, "private"
}
