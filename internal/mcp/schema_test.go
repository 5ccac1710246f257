package mcp_test

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/mcp"
)

// TestToolSchemasAreTheContracts: every tool's input schema, as a client
// lists it, is its operation's path and query parameters and request body
// members, derived here from api/openapi.yaml on its own: a change of the
// contract that the tools did not follow fails here.
func TestToolSchemasAreTheContracts(t *testing.T) {
	t.Parallel()
	w := setup(t)
	cs := w.connect(w.agent("implementer", auth.ReadOnly, "*"))
	res, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	require.Len(t, res.Tools, len(mcp.Tools))
	ops := map[string]string{}
	for _, tool := range mcp.Tools {
		ops[tool.Name] = tool.OperationID
	}
	for _, tool := range res.Tools {
		opID := ops[tool.Name]
		require.NotEmpty(t, opID, tool.Name)
		want, perm := contractSchema(t, api.Spec, opID)
		require.JSONEq(t, asJSON(t, want), asJSON(t, tool.InputSchema), "%s (%s)", tool.Name, opID)
		require.Equal(t, perm, tool.Meta[mcp.MetaPermission], tool.Name)
		require.Equal(t, opID, tool.Meta[mcp.MetaOperation], tool.Name)
		requireJSONSchema(t, tool.Name, tool.InputSchema)
	}

	// A few facts, spelled out.
	schema := func(name string) map[string]any {
		for _, tool := range res.Tools {
			if tool.Name == name {
				return tool.InputSchema.(map[string]any)
			}
		}
		t.Fatalf("no tool %s", name)
		return nil
	}
	require.Equal(t, []any{"project", "target_role"}, schema("assemble_packet")["required"])
	require.Equal(t, false, schema("assemble_packet")["additionalProperties"])
	require.Contains(t, schema("assemble_packet")["properties"], "token_budget")
	require.Equal(t, []any{"content", "key", "project"}, schema("put_item")["required"])
	require.NotContains(t, schema("put_item")["properties"], "If-Match", "header parameters are not arguments")
	why := schema("why")["properties"].(map[string]any)
	require.ElementsMatch(t, []string{"project", "id", "item", "handoff", "context_packet", "layer"}, keysOf(why))
	require.Equal(t, map[string]any{"type": "integer", "minimum": float64(0), "description": "The index of one of the request's context_packets (give item, handoff or context_packet)."}, why["context_packet"])
	require.Equal(t, []any{"intent", "project", "target", "task_id"}, schema("create_handoff")["required"])
	require.Equal(t, []any{"id", "project"}, schema("accept_handoff")["required"], "the body is optional")
	require.Contains(t, schema("search_items")["properties"], "q")
}

// requireJSONSchema: nothing of OpenAPI is left in a served schema.
func requireJSONSchema(t *testing.T, tool string, v any) {
	t.Helper()
	var walk func(path string, v any, names bool)
	walk = func(path string, v any, names bool) {
		switch v := v.(type) {
		case map[string]any:
			for k, sub := range v {
				if !names {
					require.False(t, k == "$ref" || k == "nullable" || k == "discriminator" || strings.HasPrefix(k, "x-"), "%s: %s/%s", tool, path, k)
				}
				walk(path+"/"+k, sub, !names && (k == "properties" || k == "patternProperties"))
			}
		case []any:
			for _, sub := range v {
				walk(path, sub, false)
			}
		}
	}
	walk("", v, false)
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// contractSchema derives an operation's tool schema from the contract, by
// itself: expand every reference, then rewrite OpenAPI 3.0 into JSON
// Schema, then put the parameters and the body's members side by side.
func contractSchema(t *testing.T, spec []byte, opID string) (map[string]any, string) {
	t.Helper()
	var raw any
	require.NoError(t, yaml.Unmarshal(spec, &raw))
	doc := roundTrip(t, raw).(map[string]any)
	for _, item := range doc["paths"].(map[string]any) {
		item := expand(t, doc, item, 0).(map[string]any)
		for method, op := range item {
			op, ok := op.(map[string]any)
			if !ok || method == "parameters" || op["operationId"] != opID {
				continue
			}
			return toolSchema(item, op), op["x-contextd-permission"].(string)
		}
	}
	t.Fatalf("no operation %s", opID)
	return nil, ""
}

func toolSchema(item, op map[string]any) map[string]any {
	props, required := map[string]any{}, []any{}
	var params []any
	params = append(params, listOf(item["parameters"])...)
	params = append(params, listOf(op["parameters"])...)
	for _, p := range params {
		p := p.(map[string]any)
		if p["in"] != "path" && p["in"] != "query" {
			continue
		}
		s := jsonSchema(p["schema"]).(map[string]any)
		if d, ok := p["description"]; ok {
			if _, has := s["description"]; !has {
				s["description"] = d
			}
		}
		props[p["name"].(string)] = s
		if p["in"] == "path" || p["required"] == true {
			required = append(required, p["name"])
		}
	}
	out := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if rb, ok := op["requestBody"].(map[string]any); ok {
		body := jsonSchema(rb["content"].(map[string]any)["application/json"].(map[string]any)["schema"]).(map[string]any)
		if alts, ok := body["oneOf"].([]any); ok {
			body = alts[0].(map[string]any)
		}
		for k, v := range body["properties"].(map[string]any) {
			props[k] = v
		}
		if rb["required"] == true {
			required = append(required, listOf(body["required"])...)
		}
		if body["additionalProperties"] != false {
			delete(out, "additionalProperties")
		}
	}
	sort.Slice(required, func(i, j int) bool { return required[i].(string) < required[j].(string) })
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

func listOf(v any) []any {
	l, _ := v.([]any)
	return l
}

func roundTrip(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// expand replaces every {"$ref": "#/..."} by a copy of what it points to.
func expand(t *testing.T, doc map[string]any, v any, depth int) any {
	require.Less(t, depth, 64, "references too deep")
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok {
			var target any = doc
			for _, tok := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
				target = target.(map[string]any)[tok]
			}
			require.NotNil(t, target, ref)
			return expand(t, doc, target, depth+1)
		}
		out := map[string]any{}
		for k, sub := range v {
			out[k] = expand(t, doc, sub, depth+1)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, sub := range v {
			out[i] = expand(t, doc, sub, depth+1)
		}
		return out
	}
	return v
}

// jsonSchema rewrites an expanded OpenAPI 3.0 schema as JSON Schema.
func jsonSchema(v any) any {
	s, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := map[string]any{}
	for k, sub := range s {
		switch {
		case strings.HasPrefix(k, "x-") || slices.Contains([]string{"nullable", "discriminator", "xml", "externalDocs"}, k):
		case k == "example":
			out["examples"] = []any{sub}
		case k == "properties" || k == "patternProperties":
			m := map[string]any{}
			for name, p := range sub.(map[string]any) {
				m[name] = jsonSchema(p)
			}
			out[k] = m
		case k == "allOf" || k == "anyOf" || k == "oneOf":
			var l []any
			for _, p := range sub.([]any) {
				l = append(l, jsonSchema(p))
			}
			out[k] = l
		case k == "items" || k == "additionalProperties" || k == "not":
			out[k] = jsonSchema(sub)
		default:
			out[k] = sub
		}
	}
	for _, b := range [][2]string{{"exclusiveMinimum", "minimum"}, {"exclusiveMaximum", "maximum"}} {
		if on, isBool := out[b[0]].(bool); isBool {
			delete(out, b[0])
			if on {
				out[b[0]] = out[b[1]]
				delete(out, b[1])
			}
		}
	}
	if s["nullable"] == true {
		if enum, ok := out["enum"].([]any); ok {
			out["enum"] = append(enum, nil)
		}
		if typ, ok := out["type"].(string); ok {
			out["type"] = []any{typ, "null"}
		} else {
			return map[string]any{"anyOf": []any{out, map[string]any{"type": "null"}}}
		}
	}
	return out
}

// TestNormalize: OpenAPI 3.0 becomes JSON Schema: references resolved,
// nullable a null type, extensions and OpenAPI-only keywords gone (a
// property named x-... stays), example as examples, a boolean exclusive
// bound numeric, a oneOf body its first alternative, header parameters
// left out.
func TestNormalize(t *testing.T) {
	t.Parallel()
	spec := `
openapi: 3.0.3
paths:
  /v1/things/{id}:
    parameters:
      - { name: id, in: path, required: true, schema: { type: string } }
    post:
      operationId: makeThing
      x-contextd-permission: edit
      summary: Make a thing.
      parameters:
        - { name: dry_run, in: query, required: true, description: Only check., schema: { type: boolean } }
        - { name: page, in: query, schema: { $ref: "#/components/schemas/Page" } }
        - { $ref: "#/components/parameters/Key" }
      requestBody:
        required: true
        content:
          application/json:
            schema:
              x-go-type: json.RawMessage
              oneOf:
                - $ref: "#/components/schemas/Thing"
                - { type: object, properties: { other: { type: string } } }
components:
  parameters:
    Key: { name: Idempotency-Key, in: header, schema: { type: string } }
  schemas:
    Page: { type: integer, minimum: 1, exclusiveMinimum: false, x-go-type: int }
    Thing:
      type: object
      additionalProperties: false
      required: [name]
      properties:
        name: { type: string, nullable: true, example: x, x-go-type: string }
        size: { type: integer, minimum: 1, exclusiveMinimum: true }
        colour: { type: string, enum: [red, blue], nullable: true }
        x-not-an-extension: { type: string }
        inner: { $ref: "#/components/schemas/Inner" }
        any: { nullable: true, description: Anything. }
    Inner:
      type: object
      discriminator: { propertyName: kind }
      properties: { kind: { type: string } }
`
	ops, err := mcp.Operations([]byte(spec))
	require.NoError(t, err)
	op := ops["makeThing"]
	require.Equal(t, "POST", op.Method)
	require.Equal(t, "edit", op.Permission)
	require.True(t, op.HasBody)
	require.True(t, op.BodyRequired)
	require.Equal(t, []mcp.Param{{Name: "id", In: "path", Required: true}, {Name: "dry_run", In: "query", Required: true}, {Name: "page", In: "query"}}, op.Params)
	require.JSONEq(t, `{
		"type": "object", "additionalProperties": false, "required": ["dry_run", "id", "name"],
		"properties": {
			"id": {"type": "string"},
			"dry_run": {"type": "boolean", "description": "Only check."},
			"page": {"type": "integer", "minimum": 1},
			"name": {"type": ["string", "null"], "examples": ["x"]},
			"size": {"type": "integer", "exclusiveMinimum": 1},
			"colour": {"type": ["string", "null"], "enum": ["red", "blue", null]},
			"x-not-an-extension": {"type": "string"},
			"inner": {"type": "object", "properties": {"kind": {"type": "string"}}},
			"any": {"anyOf": [{"description": "Anything."}, {"type": "null"}]}
		}}`, asJSON(t, op.InputSchema))
	want, _ := contractSchema(t, []byte(spec), "makeThing")
	require.JSONEq(t, asJSON(t, want), asJSON(t, op.InputSchema), "the test's derivation agrees")

	// A body member that is also a parameter, or a cycle, is refused.
	_, err = mcp.Operations([]byte(strings.Replace(spec, "x-not-an-extension:", "dry_run:", 1)))
	require.ErrorContains(t, err, `"dry_run" is also a parameter`)
	_, err = mcp.Operations([]byte(strings.Replace(spec, `properties: { kind: { type: string } }`, `properties: { kind: { $ref: "#/components/schemas/Inner" } }`, 1)))
	require.ErrorContains(t, err, "refers to itself")
}
