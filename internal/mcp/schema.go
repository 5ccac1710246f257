package mcp

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Operation is what a tool needs to know of an operation of the contract:
// where it is, what it takes and the permission it declares.
type Operation struct {
	ID         string
	Method     string // GET, POST, ...
	Path       string // the contract's template, /v1/projects/{project}/...
	Permission string // x-contextd-permission
	Summary    string
	// Params are the operation's path and query parameters, in the
	// contract's order (header parameters are not tool arguments).
	Params []Param
	// HasBody reports whether the operation takes a JSON request body,
	// BodyRequired whether it must have one.
	HasBody, BodyRequired bool
	// InputSchema is the tool's input schema (see Operations).
	InputSchema map[string]any
}

// Param is a path or query parameter.
type Param struct {
	Name     string
	In       string // path or query
	Required bool
}

// Operations reads every operation of spec (api.Spec) by operationId. Each
// one's InputSchema is the JSON Schema of its tool: one object whose
// properties are the operation's path and query parameters together with
// the request body's properties, after normalising OpenAPI 3.0 to JSON
// Schema (normalize). Path parameters, required query parameters and, when
// the body is required, the body's required members are required (sorted).
// A body that is a oneOf (contextd's own shape or an interop format) takes
// its first alternative, contextd's own. A body without
// additionalProperties: false would let more members through; otherwise
// the tool admits no other arguments.
func Operations(spec []byte) (map[string]Operation, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(spec, &doc); err != nil {
		return nil, fmt.Errorf("parse the contract: %w", err)
	}
	paths, _ := doc["paths"].(map[string]any)
	out := map[string]Operation{}
	for path, item := range paths {
		item, _ := item.(map[string]any)
		for method, raw := range item {
			node, ok := raw.(map[string]any)
			if !ok || method == "parameters" {
				continue
			}
			op, err := operation(doc, path, strings.ToUpper(method), node, item["parameters"])
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", strings.ToUpper(method), path, err)
			}
			out[op.ID] = op
		}
	}
	return out, nil
}

func operation(doc map[string]any, path, method string, node map[string]any, shared any) (Operation, error) {
	op := Operation{Method: method, Path: path}
	op.ID, _ = node["operationId"].(string)
	op.Permission, _ = node["x-contextd-permission"].(string)
	op.Summary, _ = node["summary"].(string)
	props := map[string]any{}
	var required []string
	params, err := parameters(doc, shared, node["parameters"])
	if err != nil {
		return op, err
	}
	for _, p := range params {
		in, _ := p["in"].(string)
		if in != "path" && in != "query" {
			continue
		}
		name, _ := p["name"].(string)
		req, _ := p["required"].(bool)
		req = req || in == "path"
		s, err := normalize(doc, p["schema"], nil)
		if err != nil {
			return op, fmt.Errorf("parameter %s: %w", name, err)
		}
		schema, _ := s.(map[string]any)
		if schema == nil {
			schema = map[string]any{}
		}
		if d, ok := p["description"].(string); ok && schema["description"] == nil {
			schema["description"] = d
		}
		props[name] = schema
		if req {
			required = append(required, name)
		}
		op.Params = append(op.Params, Param{Name: name, In: in, Required: req})
	}
	additional, err := addBody(doc, node["requestBody"], props, &required)
	if err != nil {
		return op, err
	}
	op.HasBody = node["requestBody"] != nil
	if rb, err := deref(doc, node["requestBody"]); err == nil {
		op.BodyRequired, _ = asMap(rb)["required"].(bool)
	}
	sort.Strings(required)
	schema := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		schema["required"] = required
	}
	if !additional {
		schema["additionalProperties"] = false
	}
	op.InputSchema = schema
	return op, nil
}

// parameters resolves the path item's and the operation's parameters; the
// operation's replace the path item's of the same name and location.
func parameters(doc map[string]any, shared, own any) ([]map[string]any, error) {
	var out []map[string]any
	for _, list := range []any{shared, own} {
		items, _ := list.([]any)
		for _, raw := range items {
			p, err := deref(doc, raw)
			if err != nil {
				return nil, err
			}
			pm, _ := p.(map[string]any)
			out = slices.DeleteFunc(out, func(q map[string]any) bool { return q["name"] == pm["name"] && q["in"] == pm["in"] })
			out = append(out, pm)
		}
	}
	return out, nil
}

// addBody merges the JSON request body's properties into props and reports
// whether the body admits members beyond them.
func addBody(doc map[string]any, raw any, props map[string]any, required *[]string) (bool, error) {
	if raw == nil {
		return false, nil
	}
	rb, err := deref(doc, raw)
	if err != nil {
		return false, err
	}
	body, _ := rb.(map[string]any)
	content, _ := body["content"].(map[string]any)
	media, _ := content["application/json"].(map[string]any)
	s, err := normalize(doc, media["schema"], nil)
	if err != nil {
		return false, fmt.Errorf("request body: %w", err)
	}
	schema, _ := s.(map[string]any)
	if alts, ok := schema["oneOf"].([]any); ok && len(alts) > 0 {
		schema, _ = alts[0].(map[string]any)
	}
	bodyProps, ok := schema["properties"].(map[string]any)
	if !ok || schema["type"] != "object" {
		return false, fmt.Errorf("request body: not an object schema with properties")
	}
	for name, p := range bodyProps {
		if _, dup := props[name]; dup {
			return false, fmt.Errorf("request body member %q is also a parameter", name)
		}
		props[name] = p
	}
	if req, _ := body["required"].(bool); req {
		for _, r := range asList(schema["required"]) {
			if name, ok := r.(string); ok {
				*required = append(*required, name)
			}
		}
	}
	return schema["additionalProperties"] != false, nil
}

// openAPIOnly are OpenAPI 3.0 keywords JSON Schema does not have (nullable
// and example are rewritten, not dropped).
var openAPIOnly = map[string]bool{"discriminator": true, "xml": true, "externalDocs": true}

// schemaMaps are keywords whose value maps names to schemas; schemaOne
// keywords hold one schema, schemaList keywords a list of them.
var (
	schemaMaps = map[string]bool{"properties": true, "patternProperties": true}
	schemaOne  = map[string]bool{"items": true, "not": true, "additionalProperties": true}
	schemaList = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true}
)

// normalize turns an OpenAPI 3.0 schema into a JSON Schema (2020-12): $ref
// resolved in place, x- extensions and OpenAPI-only keywords dropped,
// nullable as a "null" type (and a null in enum), example as examples,
// boolean exclusiveMinimum/exclusiveMaximum as the numeric bounds.
func normalize(doc map[string]any, node any, seen []string) (any, error) {
	m, ok := node.(map[string]any)
	if !ok {
		return node, nil
	}
	if ref, ok := m["$ref"].(string); ok {
		if slices.Contains(seen, ref) {
			return nil, fmt.Errorf("%s refers to itself", ref)
		}
		target, err := deref(doc, m)
		if err != nil {
			return nil, err
		}
		return normalize(doc, target, append(seen, ref))
	}
	out := map[string]any{}
	for k, v := range m {
		var err error
		switch {
		case strings.HasPrefix(k, "x-"), openAPIOnly[k], k == "nullable":
			continue
		case k == "example":
			out["examples"] = []any{v}
		case schemaMaps[k]:
			sub := map[string]any{}
			for name, s := range asMap(v) {
				if sub[name], err = normalize(doc, s, seen); err != nil {
					return nil, err
				}
			}
			out[k] = sub
		case schemaOne[k]:
			out[k], err = normalize(doc, v, seen)
		case schemaList[k]:
			var list []any
			for _, s := range asList(v) {
				n, err := normalize(doc, s, seen)
				if err != nil {
					return nil, err
				}
				list = append(list, n)
			}
			out[k] = list
		default:
			out[k] = v
		}
		if err != nil {
			return nil, err
		}
	}
	exclusive(out, "exclusiveMinimum", "minimum")
	exclusive(out, "exclusiveMaximum", "maximum")
	if m["nullable"] == true {
		return nullable(out), nil
	}
	return out, nil
}

// exclusive rewrites OpenAPI 3.0's boolean exclusive bound to JSON
// Schema's numeric one.
func exclusive(s map[string]any, key, bound string) {
	b, ok := s[key].(bool)
	if !ok {
		return
	}
	delete(s, key)
	if b && s[bound] != nil {
		s[key] = s[bound]
		delete(s, bound)
	}
}

// nullable admits null besides what s admits.
func nullable(s map[string]any) map[string]any {
	if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, nil) {
		s["enum"] = append(slices.Clone(enum), nil)
	}
	switch t := s["type"].(type) {
	case string:
		s["type"] = []any{t, "null"}
		return s
	case []any:
		if !slices.Contains(t, any("null")) {
			s["type"] = append(slices.Clone(t), "null")
		}
		return s
	}
	return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
}

// deref follows node's $ref (a local JSON Pointer), and the target's, to
// what is not a reference.
func deref(doc map[string]any, node any) (any, error) {
	for depth := 0; ; depth++ {
		m, ok := node.(map[string]any)
		ref, isRef := m["$ref"].(string)
		if !ok || !isRef {
			return node, nil
		}
		if depth > 32 {
			return nil, fmt.Errorf("%s: a cycle of references", ref)
		}
		if !strings.HasPrefix(ref, "#/") {
			return nil, fmt.Errorf("%s: only local references are supported", ref)
		}
		var cur any = doc
		for _, tok := range strings.Split(ref[2:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			next, ok := asMap(cur)[tok]
			if !ok {
				return nil, fmt.Errorf("%s: no such definition", ref)
			}
			cur = next
		}
		node = cur
	}
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
