package mcp

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// The JSON-RPC 2.0 error codes of a message the endpoint cannot take.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
)

// maxRefusal is how much of the SDK's plain-text refusal is kept for the
// JSON-RPC error's message.
const maxRefusal = 1024

// jsonrpcErrors makes the SDK's refusals of a message JSON-RPC errors. The
// SDK answers a POST it cannot take (a body that is not JSON, a message
// that is not JSON-RPC 2.0, a method it does not serve, a call without
// its id or params) with 400 and a line of text/plain, which an MCP
// client, speaking JSON-RPC, cannot read as an answer. Here such an answer
// becomes 400 application/json with the JSON-RPC error object: -32700
// (parse error) for a body that is not JSON, -32601 (method not found)
// for a method the server does not serve, -32600 (invalid request) for the
// rest, wrong jsonrpc version included; the id is the message's own when
// it has a valid one, else null. Everything else the SDK writes, answers
// and errors in JSON included, passes through untouched.
func jsonrpcErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		var body bytes.Buffer
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(r.Body, &body), r.Body}
		rw := &refusal{ResponseWriter: w}
		next.ServeHTTP(rw, r)
		if !rw.refused {
			return
		}
		code, message, id := classify(body.Bytes(), strings.TrimSpace(rw.text.String()))
		out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
			"error": map[string]any{"code": code, "message": message}})
		h := w.Header()
		h.Del("Content-Length")
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(out)
	})
}

// classify names the JSON-RPC error of a message the SDK refused with
// text: the code, a message and the id to answer with (raw JSON).
func classify(body []byte, text string) (int, string, json.RawMessage) {
	null := json.RawMessage("null")
	body = bytes.TrimSpace(body)
	switch {
	case len(body) == 0:
		// Refused before the body was read (its headers), or no body.
		return CodeInvalidRequest, "Invalid Request: " + text, null
	case !json.Valid(body):
		return CodeParseError, "Parse error: the body is not JSON", null
	case body[0] != '{':
		return CodeInvalidRequest, "Invalid Request: " + text, null
	}
	var msg struct {
		JSONRPC json.RawMessage `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  json.RawMessage `json:"method"`
	}
	_ = json.Unmarshal(body, &msg)
	id := null
	if len(msg.ID) > 0 && (msg.ID[0] == '"' || msg.ID[0] == '-' || (msg.ID[0] >= '0' && msg.ID[0] <= '9')) {
		id = msg.ID
	}
	var version string
	if json.Unmarshal(msg.JSONRPC, &version) != nil || version != "2.0" {
		return CodeInvalidRequest, `Invalid Request: jsonrpc must be "2.0"`, id
	}
	var method string
	if json.Unmarshal(msg.Method, &method) == nil && method != "" && strings.Contains(text, notHandled) {
		return CodeMethodNotFound, "Method not found: " + method, id
	}
	return CodeInvalidRequest, "Invalid Request: " + text, id
}

// notHandled is how the SDK's refusal of a method it does not serve reads
// (jsonrpc2.ErrNotHandled, unexported); TestProtocolErrorsAreJSONRPC
// fails if an upgrade changes it.
const notHandled = "JSON RPC not handled"

// refusal holds back a plain-text 400 (the SDK's refusal of a message)
// for jsonrpcErrors to answer instead; any other answer goes through.
type refusal struct {
	http.ResponseWriter
	refused bool
	text    bytes.Buffer
}

func (w *refusal) WriteHeader(code int) {
	if code == http.StatusBadRequest && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.refused = true
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *refusal) Write(b []byte) (int, error) {
	if !w.refused {
		return w.ResponseWriter.Write(b)
	}
	if room := maxRefusal - w.text.Len(); room > 0 {
		w.text.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}

// Flush passes a flush on, unless the answer is held back.
func (w *refusal) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.refused {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *refusal) Unwrap() http.ResponseWriter { return w.ResponseWriter }
