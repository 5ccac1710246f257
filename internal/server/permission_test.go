package server_test

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/server"
)

// specOp is one operation of api/openapi.yaml, read by the tests on their
// own so that they do not trust the parser they test.
type specOp struct {
	method, path, id, perm string
}

// echoRoute is the route Echo registers for the operation.
func (o specOp) echoRoute() string {
	// A colon inside a segment (items:import) is a literal, escaped for Echo.
	escaped := regexp.MustCompile(`([^/]):`).ReplaceAllString(o.path, `$1\:`)
	return o.method + " " + regexp.MustCompile(`\{([^}/]+)\}`).ReplaceAllString(escaped, ":$1")
}

// specOps lists the operations of the contract by path, then method.
func specOps(t *testing.T) []specOp {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]yaml.Node `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(api.Spec, &doc))
	methods := map[string]bool{"get": true, "put": true, "post": true, "delete": true, "patch": true, "head": true, "options": true, "trace": true}
	var ops []specOp
	for path, item := range doc.Paths {
		for method, node := range item {
			if !methods[method] {
				continue
			}
			var op struct {
				ID   string `yaml:"operationId"`
				Perm string `yaml:"x-contextd-permission"`
			}
			require.NoError(t, node.Decode(&op))
			ops = append(ops, specOp{method: strings.ToUpper(method), path: path, id: op.ID, perm: op.Perm})
		}
	}
	sort.Slice(ops, func(i, j int) bool {
		if ops[i].path != ops[j].path {
			return ops[i].path < ops[j].path
		}
		return ops[i].method < ops[j].method
	})
	require.NotEmpty(t, ops)
	return ops
}

// TestPermissionsCoverEveryRoute: the middleware's table holds exactly the
// contract's operations, under the very routes the generated code registers,
// so no route of the API escapes it through a spelling difference.
func TestPermissionsCoverEveryRoute(t *testing.T) {
	t.Parallel()
	perms, err := server.Permissions(api.Spec)
	require.NoError(t, err)
	want := map[string]string{}
	for _, op := range specOps(t) {
		want[op.echoRoute()] = op.perm
	}
	got := map[string]string{}
	for route, p := range perms {
		got[route] = p.Need
	}
	require.Equal(t, want, got)

	// The routes the generated code registers (server.New adds only
	// /openapi.yaml, the contract itself, which needs no key).
	router := echo.New()
	api.RegisterHandlers(server.Router(router), nil)
	routes := map[string]bool{}
	for _, r := range router.Routes() {
		routes[r.Method+" "+r.Path] = true
		require.Contains(t, perms, r.Method+" "+r.Path, "a registered route without a declared permission")
	}
	for route := range perms {
		require.True(t, routes[route], "%s is declared but not registered", route)
	}
}

// TestPermissionsRefuseIncompleteSpecs: a contract the middleware could not
// enforce as written stops the server from starting.
func TestPermissionsRefuseIncompleteSpecs(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ spec, want string }{
		"missing": {`paths: {/v1/things: {get: {operationId: listThings}}}`, `GET /v1/things: x-contextd-permission is ""`},
		"unknown": {`paths: {/v1/things: {get: {operationId: listThings, x-contextd-permission: write}}}`, `x-contextd-permission is "write"`},
		"public /v1": {`paths: {/v1/things: {get: {operationId: listThings, x-contextd-permission: public}}}`,
			"every /v1 call needs a key"},
		"keyed outside /v1": {`paths: {/things: {get: {operationId: listThings, x-contextd-permission: read}}}`,
			"only /v1 paths are authenticated"},
		"creates without project": {`paths: {/v1/things: {put: {operationId: putThing, x-contextd-permission: admin, x-contextd-creates-project: true}}}`,
			"x-contextd-creates-project needs a {project} path"},
		"no operations": {`paths: {}`, "no operations"},
	} {
		_, err := server.Permissions([]byte(tc.spec))
		require.Error(t, err, name)
		require.Contains(t, err.Error(), tc.want, name)
	}
	// The real contract with one declaration taken away.
	bad := strings.Replace(string(api.Spec), "      x-contextd-permission: admin\n      summary: Every agent", "      summary: Every agent", 1)
	require.NotEqual(t, string(api.Spec), bad)
	_, err := server.Permissions([]byte(bad))
	require.ErrorContains(t, err, `GET /v1/agents: x-contextd-permission is ""`)
}

// identity is one of the callers the walk tries every operation as.
type identity struct {
	name   string
	key    string
	perm   auth.Permission // "" when the key does not authenticate
	inHome bool            // whether the walk's project (alpha) is in scope
}

var rank = map[string]int{"read-only": 1, "read": 1, "edit": 2, "admin": 3}

// walkCase is how the walk exercises one operation.
type walkCase struct {
	// perm is what the operation needs, stated here on its own: the test
	// checks the spec's declaration against it, so a changed declaration
	// is a reviewed change of this table too.
	perm string
	ok   int // the status of a success
	// call builds the request one identity sends (creating any fresh
	// objects it consumes first): a path with query, a body, headers.
	call func(w *world, id identity) (string, any)
	// want holds the statuses a service's per-object rule decides, by
	// identity name, where that rule and not the permission answers.
	want map[string]int
}

// world is the walk's fixtures: the project alpha with an item, a packet
// and a handoff of task T-1, and beta, the project of the identities scoped
// elsewhere. Every non-admin agent has the role worker, the packet is for
// that role, so the per-role rules let them through.
type world struct {
	e        *env
	readerID string
	packet   string
	handoff  string
	n        int
}

const (
	home     = "/v1/projects/alpha"
	fact     = "The ledger closes on the 5th."
	worker   = "worker"
	reviewer = "reviewer"
)

func (w *world) fresh(prefix string) string {
	w.n++
	return fmt.Sprintf("%s-%d", prefix, w.n)
}

// project creates a project as the admin, archived when archived says so,
// and returns its path.
func (w *world) project(archived bool) string {
	path := "/v1/projects/" + w.fresh("retired")
	r := w.e.do("PUT", path, w.e.admin, api.PutProjectJSONRequestBody{})
	require.Equal(w.e.t, 201, r.status, r.text)
	if archived {
		r = w.e.do("DELETE", path, w.e.admin, nil)
		require.Equal(w.e.t, 200, r.status, r.text)
	}
	return path
}

// handoffTo creates a pending handoff of a task of its own to the role, as
// the admin; source, when given, names its source agent.
func (w *world) handoffTo(role string, source map[string]any) string {
	body := map[string]any{"task_id": w.fresh("T"), "target": map[string]any{"role": role}, "intent": "request_review"}
	if source != nil {
		body["source"] = source
	}
	r := w.e.do("POST", home+"/handoffs", w.e.admin, body)
	require.Equal(w.e.t, 201, r.status, r.text)
	return r.json["id"].(string)
}

func newWorld(t *testing.T) (*world, []identity) {
	stopped := make(chan struct{})
	close(stopped) // the event stream answers, then ends at once
	e := setupWith(t, server.Config{Stopping: stopped})
	e.project("alpha")
	e.project("beta")
	w := &world{e: e}

	mk := func(name string, perm auth.Permission, projects ...string) resp {
		r := e.do("POST", "/v1/agents", e.admin, map[string]any{"name": name, "role": worker, "permission": perm, "projects": projects})
		require.Equal(t, 201, r.status, r.text)
		return r
	}
	reader := mk("reader", auth.ReadOnly, "alpha")
	w.readerID = reader.json["id"].(string)
	revoked := mk("revoked", auth.Admin, "*")
	require.Equal(t, 200, e.do("DELETE", "/v1/agents/"+revoked.json["id"].(string), e.admin, nil).status)

	r := e.do("PUT", home+"/items/fact", e.admin, map[string]any{"content": fact, "trigger": map[string]any{"always": true}})
	require.Equal(t, 201, r.status, r.text)
	r = e.do("POST", home+"/packets", e.admin, map[string]any{"target_role": worker, "task": map[string]any{"task_id": "T-1"}})
	require.Equal(t, 201, r.status, r.text)
	require.Contains(t, r.json["rendered"], fact)
	w.packet = r.json["packet_id"].(string)
	r = e.do("POST", home+"/handoffs", e.admin, map[string]any{"task_id": "T-1", "target": map[string]any{"role": reviewer}, "intent": "request_review"})
	require.Equal(t, 201, r.status, r.text)
	w.handoff = r.json["id"].(string)

	return w, []identity{
		{name: "no key", key: ""},
		{name: "malformed key", key: "not-a-contextd-key"},
		{name: "revoked key", key: revoked.json["key"].(string)},
		{name: "agent of another project", key: e.agent(worker, auth.Edit, "beta"), perm: auth.Edit},
		{name: "read-only agent", key: reader.json["key"].(string), perm: auth.ReadOnly, inHome: true},
		{name: "edit agent", key: e.agent(worker, auth.Edit, "alpha"), perm: auth.Edit, inHome: true},
		{name: "admin of another project", key: e.agent(worker, auth.Admin, "beta"), perm: auth.Admin},
		{name: "admin", key: e.admin, perm: auth.Admin, inHome: true},
	}
}

func at(path string) func(*world, identity) (string, any) {
	return func(*world, identity) (string, any) { return path, nil }
}

// walkCases holds one case per operation of the contract, by operationId.
var walkCases = map[string]walkCase{
	"getHealthz":   {perm: "public", ok: 200, call: at("/healthz")},
	"getReadyz":    {perm: "public", ok: 200, call: at("/readyz")},
	"listProjects": {perm: "read", ok: 200, call: at("/v1/projects")},
	"putProject": {perm: "admin", ok: 201, call: func(w *world, id identity) (string, any) {
		if id.name == "admin" {
			// A project that does not exist yet: creating it is the point.
			return "/v1/projects/" + w.fresh("new"), api.PutProjectJSONRequestBody{Description: ptr("made by the walk")}
		}
		return home, api.PutProjectJSONRequestBody{Description: ptr("test")}
	}},
	"getProject": {perm: "read", ok: 200, call: at(home)},
	// The admin archives (and restores) a project of its own making, so
	// that alpha stays writable for the rest of the walk.
	"archiveProject": {perm: "admin", ok: 200, call: func(w *world, id identity) (string, any) {
		if id.name == "admin" {
			return w.project(false), nil
		}
		return home, nil
	}},
	"restoreProject": {perm: "admin", ok: 200, call: func(w *world, id identity) (string, any) {
		if id.name == "admin" {
			return w.project(true) + "/restore", nil
		}
		return home + "/restore", nil
	}},
	// Role policies: anyone who may read the project reads them; admins
	// set them, each on a role of its own, so the workers' packets stay
	// as they were.
	"listRolePolicies": {perm: "read", ok: 200, call: at(home + "/roles")},
	"getRolePolicy":    {perm: "read", ok: 200, call: at(home + "/roles/" + worker)},
	"putRolePolicy": {perm: "admin", ok: 200, call: func(w *world, _ identity) (string, any) {
		return home + "/roles/" + w.fresh("role"), map[string]any{"token_budget": 4000, "kinds": []string{"knowledge"}}
	}},
	"deleteRolePolicy": {perm: "admin", ok: 200, call: func(w *world, _ identity) (string, any) {
		role := w.fresh("role")
		r := w.e.do("PUT", home+"/roles/"+role, w.e.admin, map[string]any{"token_budget": 4000})
		require.Equal(w.e.t, 200, r.status, r.text)
		return home + "/roles/" + role, nil
	}},
	"listItems": {perm: "read", ok: 200, call: at(home + "/items")},
	"batchItems": {perm: "edit", ok: 200, call: func(w *world, _ identity) (string, any) {
		return home + "/items", map[string]any{"items": []any{map[string]any{"key": w.fresh("batch"), "content": "batched"}}}
	}},
	"importItems": {perm: "edit", ok: 200, call: func(w *world, _ identity) (string, any) {
		return home + "/items:import", map[string]any{"format": "contextd", "items": []any{map[string]any{"key": w.fresh("import"), "content": "imported"}}}
	}},
	"getItem": {perm: "read", ok: 200, call: at(home + "/items/fact")},
	"putItem": {perm: "edit", ok: 201, call: func(w *world, _ identity) (string, any) {
		return home + "/items/" + w.fresh("put"), map[string]any{"content": "written"}
	}},
	"deleteItem": {perm: "edit", ok: 200, call: func(w *world, _ identity) (string, any) {
		key := w.fresh("doomed")
		r := w.e.do("PUT", home+"/items/"+key, w.e.admin, api.PutItemJSONRequestBody{Content: "to be deleted"})
		require.Equal(w.e.t, 201, r.status, r.text)
		return home + "/items/" + key, nil
	}},
	"listItemVersions":   {perm: "read", ok: 200, call: at(home + "/items/fact/versions")},
	"getItemVersion":     {perm: "read", ok: 200, call: at(home + "/items/fact/versions/1")},
	"listItemInjections": {perm: "read", ok: 200, call: at(home + "/items/fact/injections")},
	"getItemLedger":      {perm: "read", ok: 200, call: at(home + "/items/fact/ledger")},
	"getProjectLedger":   {perm: "read", ok: 200, call: at(home + "/ledger")},
	// Proposals: each case makes a fresh proposal by an agent of its own
	// name (walkProposal), so no identity of the walk is its author.
	"listProposals": {perm: "read", ok: 200, call: at(home + "/proposals?status=pending")},
	"listItemProposals": {perm: "read", ok: 200, call: func(w *world, _ identity) (string, any) {
		return home + "/items/" + w.walkProposal() + "/proposals", nil
	}},
	"getItemProposal": {perm: "read", ok: 200, call: func(w *world, _ identity) (string, any) {
		return home + "/items/" + w.walkProposal() + "/proposals/1", nil
	}},
	"promoteProposal": {perm: "edit", ok: 200, call: func(w *world, _ identity) (string, any) {
		return home + "/items/" + w.walkProposal() + "/proposals/1/promote", map[string]any{}
	}},
	"rejectProposal": {perm: "edit", ok: 200, call: func(w *world, _ identity) (string, any) {
		return home + "/items/" + w.walkProposal() + "/proposals/1/reject", map[string]any{"reason": "not now"}
	}},
	"redactItemVersion": {perm: "admin", ok: 202, call: func(w *world, _ identity) (string, any) {
		key := w.fresh("secret")
		r := w.e.do("PUT", home+"/items/"+key, w.e.admin, api.PutItemJSONRequestBody{Content: "a leaked token"})
		require.Equal(w.e.t, 201, r.status, r.text)
		return home + "/items/" + key + "/versions/1/redact", map[string]any{"reason": "leaked"}
	}},
	"getRedaction": {perm: "admin", ok: 200, call: func(w *world, _ identity) (string, any) {
		key := w.fresh("secret")
		r := w.e.do("PUT", home+"/items/"+key, w.e.admin, api.PutItemJSONRequestBody{Content: "a leaked token"})
		require.Equal(w.e.t, 201, r.status, r.text)
		r = w.e.do("POST", home+"/items/"+key+"/versions/1/redact", w.e.admin, map[string]any{"reason": "leaked"})
		require.Equal(w.e.t, 202, r.status, r.text)
		return home + "/redactions/" + r.json["id"].(string), nil
	}},
	"listAuditEntries":   {perm: "admin", ok: 200, call: at(home + "/audit/entries")},
	"verifyAudit":        {perm: "admin", ok: 200, call: at(home + "/audit/verify")},
	"getAuditCheckpoint": {perm: "admin", ok: 200, call: at(home + "/audit/checkpoint")},
	// The global chain (agents) is for admins of every project.
	"listGlobalAuditEntries":   {perm: "admin", ok: 200, call: at("/v1/audit/entries"), want: map[string]int{"admin of another project": 403}},
	"verifyGlobalAudit":        {perm: "admin", ok: 200, call: at("/v1/audit/verify"), want: map[string]int{"admin of another project": 403}},
	"getGlobalAuditCheckpoint": {perm: "admin", ok: 200, call: at("/v1/audit/checkpoint"), want: map[string]int{"admin of another project": 403}},
	"assemblePacket": {perm: "read", ok: 201, call: func(*world, identity) (string, any) {
		// Non-admins assemble for their own role only (a service rule);
		// every agent of the walk is a worker.
		return home + "/packets", map[string]any{"target_role": worker}
	}},
	"listPackets": {perm: "read", ok: 200, call: at(home + "/packets")},
	"getPacket": {perm: "read", ok: 200, call: func(w *world, _ identity) (string, any) {
		return home + "/packets/" + w.packet, nil
	}},
	"listPacketRecords": {perm: "read", ok: 200, call: func(w *world, _ identity) (string, any) {
		return home + "/packets/" + w.packet + "/records", nil
	}},
	"whyPacket": {perm: "read", ok: 200, call: func(w *world, _ identity) (string, any) {
		return home + "/packets/" + w.packet + "/why?item=fact", nil
	}},
	"attributePacket": {perm: "read", ok: 200, call: func(w *world, _ identity) (string, any) {
		return home + "/packets/" + w.packet + "/attribute", map[string]any{"text": fact}
	}},
	"replayPacket": {perm: "read", ok: 200, call: func(w *world, _ identity) (string, any) {
		return home + "/packets/" + w.packet + "/replay", nil
	}},
	"listOutcomes": {perm: "read", ok: 200, call: func(w *world, _ identity) (string, any) {
		return home + "/packets/" + w.packet + "/outcomes", nil
	}},
	// An outcome is the packet's own agent's to record, or an editor's of
	// the project (a service rule): the admin assembled the walk's packet,
	// so the read-only agent, which may open it, is refused.
	"recordOutcome": {perm: "read", ok: 201, call: func(w *world, _ identity) (string, any) {
		return home + "/packets/" + w.packet + "/outcomes", map[string]any{"status": "failure", "source": "test"}
	}, want: map[string]int{"read-only agent": 403}},
	// Whoever may open a packet may ask for a counterfactual of it, as
	// whoever may assemble for its role may assemble.
	"ablatePacket": {perm: "read", ok: 201, call: func(w *world, _ identity) (string, any) {
		return home + "/packets/" + w.packet + "/ablations", map[string]any{"without": []any{map[string]any{"key": "fact"}}}
	}},
	"getSuspects": {perm: "read", ok: 200, call: func(w *world, _ identity) (string, any) {
		return home + "/packets/" + w.packet + "/suspects", nil
	}},
	"createHandoff": {perm: "edit", ok: 201, call: func(w *world, _ identity) (string, any) {
		return home + "/handoffs", map[string]any{"task_id": w.fresh("T"), "target": map[string]any{"role": reviewer}, "intent": "request_review"}
	}},
	"listHandoffs":        {perm: "read", ok: 200, call: at(home + "/handoffs")},
	"streamHandoffEvents": {perm: "read", ok: 200, call: at(home + "/handoffs/events")},
	"getHandoff": {perm: "read", ok: 200, call: func(w *world, _ identity) (string, any) {
		return home + "/handoffs/" + w.handoff, nil
	}},
	// Accept and reject need only read: who may is the target role (or an
	// admin), a rule of the service; the fresh handoffs go to the workers.
	"acceptHandoff": {perm: "read", ok: 200, call: func(w *world, _ identity) (string, any) {
		return home + "/handoffs/" + w.handoffTo(worker, nil) + "/accept", nil
	}},
	"rejectHandoff": {perm: "read", ok: 200, call: func(w *world, _ identity) (string, any) {
		return home + "/handoffs/" + w.handoffTo(worker, nil) + "/reject", map[string]any{"reason": "not yet"}
	}},
	// Withdraw needs only read too: who may is the source agent (or an
	// admin). The handoffs name the read-only agent as their source, which
	// shows read is enough; the edit agent is then not the source, and the
	// service says 403.
	"withdrawHandoff": {perm: "read", ok: 200, want: map[string]int{"edit agent": 403}, call: func(w *world, _ identity) (string, any) {
		id := w.handoffTo(reviewer, map[string]any{"role": worker, "agent_id": w.readerID})
		return home + "/handoffs/" + id + "/withdraw", map[string]any{"reason": "taken back"}
	}},
	"getTaskHistory": {perm: "read", ok: 200, call: at(home + "/tasks/T-1/history")},
	"attributeTask": {perm: "read", ok: 200, call: func(w *world, _ identity) (string, any) {
		return home + "/tasks/T-1/attribute", map[string]any{"text": fact}
	}},
	"listAgents": {perm: "admin", ok: 200, call: at("/v1/agents")},
	// The new agents are scoped to beta, which the admin of another
	// project holds, so it may grant and revoke them.
	"createAgent": {perm: "admin", ok: 201, call: func(w *world, _ identity) (string, any) {
		return "/v1/agents", map[string]any{"name": w.fresh("walker"), "role": "walker", "permission": "read-only", "projects": []string{"beta"}}
	}},
	"revokeAgent": {perm: "admin", ok: 200, call: func(w *world, _ identity) (string, any) {
		r := w.e.do("POST", "/v1/agents", w.e.admin, map[string]any{"name": w.fresh("victim"), "role": "walker", "permission": "read-only", "projects": []string{"beta"}})
		require.Equal(w.e.t, 201, r.status, r.text)
		return "/v1/agents/" + r.json["id"].(string), nil
	}},
	"updateAgent": {perm: "admin", ok: 200, call: func(w *world, _ identity) (string, any) {
		r := w.e.do("POST", "/v1/agents", w.e.admin, map[string]any{"name": w.fresh("changed"), "role": "walker", "permission": "read-only", "projects": []string{"beta"}})
		require.Equal(w.e.t, 201, r.status, r.text)
		return "/v1/agents/" + r.json["id"].(string), map[string]any{"max_authority": "evidence"}
	}},
}

// expect is the status an identity gets from an operation: 401 without a
// valid key, 404 for a project outside the scope, 403 for a missing
// permission, else the operation's success (or a service's own answer).
func expect(c walkCase, op specOp, id identity) int {
	if s, ok := c.want[id.name]; ok {
		return s
	}
	switch {
	case c.perm == "public":
		return c.ok
	case id.perm == "":
		return 401
	case strings.Contains(op.path, "{project}") && !id.inHome:
		return 404
	case rank[string(id.perm)] < rank[c.perm]:
		return 403
	}
	return c.ok
}

// fits reports whether a concrete path (with any query) is one of the
// template's ({x} stands for one segment).
func fits(template, path string) bool {
	path, _, _ = strings.Cut(path, "?")
	want, got := strings.Split(template, "/"), strings.Split(path, "/")
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if param := strings.HasPrefix(want[i], "{"); param && got[i] == "" || !param && want[i] != got[i] {
			return false
		}
	}
	return true
}

// TestPermissionWalk calls every operation of the contract as each of the
// identities and asserts the exact status, so an over-denial or a 5xx fails
// as surely as a leak. An operation without a case fails the test.
func TestPermissionWalk(t *testing.T) {
	t.Parallel()
	w, ids := newWorld(t)
	ops := specOps(t)
	seen := map[string]bool{}
	n := 0
	for _, op := range ops {
		c, ok := walkCases[op.id]
		if !ok {
			t.Errorf("%s %s (%s) has no walk case; add one to walkCases", op.method, op.path, op.id)
			continue
		}
		seen[op.id] = true
		require.Equal(t, c.perm, op.perm, "%s: the spec declares %q, the walk expects %q", op.id, op.perm, c.perm)
		for _, id := range ids {
			path, body := c.call(w, id)
			require.True(t, fits(op.path, path), "%s: the case calls %s, another route", op.id, path)
			r := w.e.do(op.method, path, id.key, body)
			require.Equal(t, expect(c, op, id), r.status, "%s %s as %s: %s", op.method, path, id.name, r.text)
			n++
		}
	}
	for name := range walkCases {
		require.True(t, seen[name], "walk case %s names no operation of the contract", name)
	}
	t.Logf("%d cases: %d operations × %d identities", n, len(ops), len(ids))
}

// TestPermissionCreatesProject: on the operation that creates its project,
// a caller who may create it in scope is not told the project is missing;
// anyone else is answered as on any other route (404, then 403).
func TestPermissionCreatesProject(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("alpha")
	scopedAdmin := e.agent("ops", auth.Admin, "gamma")
	editor := e.agent("ops", auth.Edit, "alpha", "delta")

	require.Equal(t, 201, e.do("PUT", "/v1/projects/gamma", scopedAdmin, nil).status, "missing, in scope: created")
	require.Equal(t, 200, e.do("PUT", "/v1/projects/gamma", scopedAdmin, nil).status)
	require.Equal(t, 404, e.do("PUT", "/v1/projects/alpha", scopedAdmin, nil).status, "out of scope")
	require.Equal(t, 403, e.do("PUT", "/v1/projects/_shared", scopedAdmin, nil).status, "_shared is not in its scope to write")
	require.Equal(t, 422, e.do("PUT", "/v1/projects/_shared", e.admin, nil).status, "reserved, said by the service")
	require.Equal(t, 404, e.do("PUT", "/v1/projects/delta", editor, nil).status, "missing, not an admin")
	require.Equal(t, 403, e.do("PUT", "/v1/projects/alpha", editor, nil).status, "existing, not an admin")
	require.Equal(t, 403, e.do("PUT", "/v1/projects/_shared", editor, nil).status)
	// Elsewhere a missing project is 404 even for the admin of everything.
	require.Equal(t, 404, e.do("GET", "/v1/projects/nowhere/items", e.admin, nil).status)
	require.Equal(t, 404, e.do("PUT", "/v1/projects/nowhere/items/k", e.admin, api.PutItemJSONRequestBody{Content: "x"}).status)
}

// TestPermissionSharedProject: _shared is in every scope, readable by every
// agent, and writable only by admins whose scope is every project or names
// _shared: it enters every project's packets.
func TestPermissionSharedProject(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("beta")
	reader := e.agent("worker", auth.ReadOnly, "beta")
	editor := e.agent("worker", auth.Edit, "beta")
	scopedAdmin := e.agent("worker", auth.Admin, "beta")
	sharedAdmin := e.agent("worker", auth.Admin, "beta", "_shared")
	item := map[string]any{"content": "shared default"}

	require.Equal(t, 200, e.do("GET", "/v1/projects/_shared/items", reader, nil).status)
	require.Equal(t, 403, e.do("PUT", "/v1/projects/_shared/items/k", editor, item).status)
	require.Equal(t, 403, e.do("PUT", "/v1/projects/_shared/items/k", scopedAdmin, item).status, "an admin of beta only")
	require.Equal(t, 403, e.do("POST", "/v1/projects/_shared/items", scopedAdmin, map[string]any{"items": []any{map[string]any{"key": "k", "content": "x"}}}).status)
	require.Equal(t, 403, e.do("DELETE", "/v1/projects/_shared/items/k", scopedAdmin, nil).status)
	require.Equal(t, 201, e.do("PUT", "/v1/projects/_shared/items/k", sharedAdmin, item).status, "names _shared")
	require.Equal(t, 201, e.do("PUT", "/v1/projects/_shared/items/k", e.admin, api.PutItemJSONRequestBody{Content: "shared, v2"}).status, "every project")
	// A scoped admin cannot hand out _shared either.
	require.Equal(t, 403, e.do("POST", "/v1/agents", scopedAdmin, map[string]any{"name": "x", "role": "r", "permission": "admin", "projects": []string{"beta", "_shared"}}).status)
	require.Equal(t, 201, e.do("POST", "/v1/agents", sharedAdmin, map[string]any{"name": "x", "role": "r", "permission": "admin", "projects": []string{"_shared"}}).status)
	require.Equal(t, 200, e.do("GET", "/v1/projects/_shared/items/k", reader, nil).status)
	// Assembling needs only read, but not in _shared: a packet is written
	// to its project (a rule of the packet service).
	require.Equal(t, 403, e.do("POST", "/v1/projects/_shared/packets", reader, api.AssemblePacketJSONRequestBody{TargetRole: "worker"}).status)
}
