package server

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/handoff"
	"github.com/contextd/contextd/internal/kxm"
	"github.com/contextd/contextd/internal/validation"
)

// mapperHandoffs are handoffs for the mappers: one with every member (a
// zero witness code, an artifact and a verdict with empty members, a next
// step with one), one as a create leaves a sparse manifest (empty lists),
// and one with nil lists and an empty next step.
func mapperHandoffs() map[string]*handoff.Handoff {
	at := time.Date(2026, 1, 14, 9, 41, 27, 318_000_000, time.FixedZone("CET", 3600))
	code, passed := 0, true
	rich := &handoff.Handoff{Manifest: handoff.Manifest{TaskID: "T-1", WorkflowRunID: "run-1", ReworkOf: "hnd_prev",
		Source: handoff.Source{Role: "implementer", AgentID: "agt_1", Harness: "pi", Model: "m<&>", StepID: "s", AttemptID: "a"},
		Target: handoff.Target{Role: "critic", Permission: "edit"}, Intent: "dispatch_fix", BaseCommit: "abc", CandidateTreeHash: "def",
		Deliverables: handoff.Deliverables{Patches: []string{"p1", "p2"}, Reports: []string{"r"},
			Artifacts: []handoff.Artifact{{Name: "n", ArtifactRef: "ref", Kind: "log", ContentSnippet: "é snippet"}, {Name: "m"}}},
		VerificationEvidence: handoff.Evidence{WitnessExitCode: &code, WitnessPassed: &passed,
			CriticVerdicts: []handoff.Verdict{{Critic: "c", Verdict: "FAIL", Summary: "why"}, {Critic: "d", Verdict: "PASS"}}},
		OpenQuestions: []string{"q?"}, SuggestedNextStep: &handoff.NextStep{Action: "fix"}, Summary: "sum", Decisions: []string{"d1"},
		PacketID: "pkt_1"},
		Warnings: []validation.Field{{Code: "no_agent_for_role", Detail: "x"}, {Pointer: "/handoffId", Code: "kxm_handoff_id_replaced", Detail: "y"}},
		ID:       "hnd_1", Project: "p", Status: "rejected", StatusReason: "nope", SupersededBy: "hnd_2", CreatedBy: "agt_1", CreatedAt: at, UpdatedAt: at.Add(time.Hour)}
	sparse := &handoff.Handoff{Manifest: handoff.Manifest{TaskID: "T-2", Source: handoff.Source{Role: "implementer", AgentID: "agt_1"},
		Target: handoff.Target{Role: "critic"}, Intent: "request_review",
		Deliverables:         handoff.Deliverables{Patches: []string{}, Reports: []string{}, Artifacts: []handoff.Artifact{}},
		VerificationEvidence: handoff.Evidence{CriticVerdicts: []handoff.Verdict{}}, OpenQuestions: []string{}, Decisions: []string{}},
		ID: "hnd_3", Project: "p", Status: "pending", CreatedBy: "agt_1", CreatedAt: at, UpdatedAt: at}
	nils := &handoff.Handoff{Manifest: handoff.Manifest{TaskID: "T-3", SuggestedNextStep: &handoff.NextStep{}},
		ID: "hnd_4", Project: "p", Status: "accepted", CreatedAt: at, UpdatedAt: at}
	return map[string]*handoff.Handoff{"rich": rich, "sparse": sparse, "nils": nils}
}

// mapperBodies are create bodies: contextd's with every member, with only
// the required ones, with nulls and empty lists and objects, and KXM's
// manifest with nulls and empty lists (its full fixture is added below).
var mapperBodies = map[string]string{
	"rich": `{"task_id":"T-1","workflow_run_id":"run","rework_of":"hnd_0","source":{"role":"r","agent_id":"a","harness":"h","model":"m","step_id":"s","attempt_id":"at"},
"target":{"role":"critic","permission":"edit"},"intent":"dispatch_fix","base_commit":"b","candidate_tree_hash":"c",
"deliverables":{"patches":["p"],"reports":["r"],"artifacts":[{"name":"n","artifact_ref":"ar","kind":"k","content_snippet":"cs"},{}]},
"verification_evidence":{"witness_exit_code":0,"witness_passed":false,"critic_verdicts":[{"critic":"c","verdict":"WARN","summary":"s"},{}]},
"open_questions":["q"],"suggested_next_step":{"step_id":"st","action":"ac"},"summary":"su","decisions":["d"],"packet_id":"pkt"}`,
	"sparse": `{"task_id":"T-2","intent":"request_review","target":{"role":"critic"}}`,
	"nulls": `{"task_id":"T-3","intent":"request_review","target":{},"decisions":null,"open_questions":[],"source":{},
"deliverables":{"artifacts":[],"patches":null},"verification_evidence":{"critic_verdicts":[]},"suggested_next_step":{}}`,
	"kxmnulls": `{"schema":"kxm.handoff-manifest.v1","taskId":"K","workflowRunId":"w","reworkOf":null,"source":{"role":"r","agentId":"a","harness":"h","stepId":"s","attemptId":"t"},
"target":{"role":"critic","permission":"read-only"},"intent":"request_review","baseCommit":"b","deliverables":{"patches":[],"reports":[],"artifacts":[]},
"verificationEvidence":{"witnessExitCode":null,"witnessPassed":null,"criticVerdicts":[]},"openQuestions":[],"suggestedNextStep":{},"status":"pending"}`,
}

// TestHandoffMappersGolden: the typed mappers answer byte for byte what
// the JSON round trip they replaced did (testdata/handoff_answers.golden):
// the API's Handoff and HandoffDetail, KXM's manifest, and the create
// input (domain JSON: nil and empty lists apart) from either body.
func TestHandoffMappersGolden(t *testing.T) {
	got := map[string]any{}
	for name, h := range mapperHandoffs() {
		got["api_"+name] = toHandoffAPI(h)
		got["detail_"+name] = toHandoffDetail(&handoff.Detail{Handoff: h,
			Events:    []handoff.Event{{Seq: 1, HandoffID: h.ID, Event: "created", ToStatus: "pending", CreatedAt: h.CreatedAt}},
			Ancestors: []handoff.Link{{ID: "hnd_0", Status: "rejected", CreatedAt: h.CreatedAt}},
			UsedBy:    []handoff.PacketUse{{PacketID: "pkt", CreatedAt: h.CreatedAt}}})
		got["kxm_"+name] = toKXMManifest(h)
	}
	fixture, err := os.ReadFile(filepath.Join("..", "kxm", "testdata", "kxm-handoff-manifest.json"))
	require.NoError(t, err)
	bodies := map[string]string{"kxmfixture": string(fixture)}
	for k, v := range mapperBodies {
		bodies[k] = v
	}
	for name, b := range bodies {
		m, fromKXM, ws, err := createInput([]byte(b))
		require.NoError(t, err, name)
		got["create_"+name] = map[string]any{"m": m, "kxm": fromKXM, "ws": ws}
	}

	f, err := os.Open(filepath.Join("testdata", "handoff_answers.golden"))
	require.NoError(t, err)
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			name, answer, _ := strings.Cut(line, " ")
			want[name] = answer
		}
	}
	require.NoError(t, sc.Err())
	require.Len(t, got, len(want))
	for name, v := range got {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		require.Equal(t, want[name], string(b), name)
	}
}

// TestKXMManifestMapsBothWays: KXM's manifest maps onto contextd's create
// input member by member, and back through toKXMManifest unchanged but for
// what contextd sets (handoffId, status, createdAt). Without a database;
// TestHandoffKXMManifestRoundTrip does the same through the API.
func TestKXMManifestMapsBothWays(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "kxm", "testdata", "kxm-handoff-manifest.json"))
	require.NoError(t, err)
	var in kxm.ManifestInput
	require.NoError(t, json.Unmarshal(raw, &in))
	m := fromKXMManifest(in)
	require.Equal(t, "KXM-412", m.TaskID)
	require.Equal(t, "claude-code", m.Source.Harness)
	require.Equal(t, "artifacts/run_8d21f0c4a9b3/witness.log", m.Deliverables.Artifacts[0].ArtifactRef)

	at := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	out, err := json.Marshal(toKXMManifest(&handoff.Handoff{Manifest: m, ID: "hnd_contextd", Status: "accepted", CreatedAt: at}))
	require.NoError(t, err)
	var want, got map[string]any
	require.NoError(t, json.Unmarshal(raw, &want))
	require.NoError(t, json.Unmarshal(out, &got))
	want["handoffId"], want["status"], want["createdAt"] = "hnd_contextd", "accepted", "2026-02-01T00:00:00Z"
	require.Equal(t, want, got)
}
