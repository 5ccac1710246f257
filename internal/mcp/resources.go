package mcp

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// resource is the handler of a resource template over op, a GET of
// /v1/projects/{project}/<kind>/{x}: the URI's values become the
// operation's path parameters and the answer, through contents, the
// resource. The call is the caller's, as a tool's is.
func (d *dispatcher) resource(op Operation, kind string, contents func(uri string, body []byte) (*sdk.ResourceContents, error)) sdk.ResourceHandler {
	return func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		uri := req.Params.URI
		project, id, ok := parseURI(uri, kind)
		if !ok || len(op.Params) < 2 {
			return nil, sdk.ResourceNotFoundError(uri)
		}
		a := d.call(ctx, op, map[string]any{op.Params[0].Name: project, op.Params[1].Name: id}, header(req.Extra))
		if !a.ok() {
			return nil, resourceError(a)
		}
		c, err := contents(uri, a.body)
		if err != nil {
			return nil, err
		}
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{c}}, nil
	}
}

// parseURI reads contextd://projects/{project}/<kind>/{id}, its values
// percent-decoded.
func parseURI(uri, kind string) (project, id string, ok bool) {
	rest, ok := strings.CutPrefix(uri, "contextd://projects/")
	parts := strings.Split(rest, "/")
	if !ok || strings.ContainsAny(rest, "?#") || len(parts) != 3 || parts[1] != kind {
		return "", "", false
	}
	project, err1 := url.PathUnescape(parts[0])
	id, err2 := url.PathUnescape(parts[2])
	if err1 != nil || err2 != nil || project == "" || id == "" {
		return "", "", false
	}
	return project, id, true
}

// resourceError is a refused read as a JSON-RPC error whose data is the
// problem document: not found (including what the caller may not see) as
// MCP's resource-not-found (invalid params, SEP-2164), as are other
// refusals; a server error as an internal error.
func resourceError(a answer) error {
	var p struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
	}
	_ = json.Unmarshal(a.body, &p)
	code, msg := int64(jsonrpc.CodeInvalidParams), p.Code+": "+p.Detail
	switch {
	case a.status == 404:
		msg = "Resource not found: " + p.Detail
	case a.status >= 500:
		code = jsonrpc.CodeInternalError
	}
	return &jsonrpc.Error{Code: code, Message: msg, Data: json.RawMessage(a.body)}
}

// packetContents is a packet's rendered text, typed by its format.
func packetContents(uri string, body []byte) (*sdk.ResourceContents, error) {
	var p struct {
		Rendered string `json:"rendered"`
		Format   string `json:"format"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, err
	}
	mime := "text/plain"
	switch p.Format {
	case "markdown", "":
		mime = "text/markdown"
	case "json", "kxm":
		mime = "application/json"
	}
	return &sdk.ResourceContents{URI: uri, MIMEType: mime, Text: p.Rendered}, nil
}

// itemContents is an item's version as the API answers it.
func itemContents(uri string, body []byte) (*sdk.ResourceContents, error) {
	return &sdk.ResourceContents{URI: uri, MIMEType: "application/json", Text: string(body)}, nil
}
