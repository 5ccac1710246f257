// Package api is contextd's HTTP contract: openapi.yaml, and the Echo server
// interface and types that oapi-codegen generates from it (api.gen.go). The
// handlers that implement the interface live in internal/server.
package api

import _ "embed"

//go:generate go tool -modfile=../tools/go.mod oapi-codegen -config oapi-codegen.yaml openapi.yaml

// Spec is openapi.yaml as served at /openapi.yaml.
//
//go:embed openapi.yaml
var Spec []byte
