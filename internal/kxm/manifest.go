package kxm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/contextd/contextd/internal/validation"
)

// ManifestSchema is the schema member of KXM's handoff manifest v1.
const ManifestSchema = "kxm.handoff-manifest.v1"

// MissingText is what an exported manifest says for a member KXM requires to
// be non-empty that the handoff does not have (workflowRunId, source.harness,
// source.stepId, source.attemptId: optional in contextd).
const MissingText = "unknown"

// NoWitness is the witnessExitCode of an exported manifest whose handoff
// records no witness run (witnessPassed is then false).
const NoWitness = -1

// DefaultPermission is target.permission of an exported manifest whose
// handoff names none: the least a handoff can hand on.
const DefaultPermission = "read-only"

// Manifest is KXM's HandoffManifestV1 (plugins/kxm/src/context-packet.ts,
// schemas/handoff-manifest.schema.json): exactly its members, camelCase,
// the optional ones left out when unset as KXM's builder does.
type Manifest struct {
	Schema               string               `json:"schema"`
	HandoffID            string               `json:"handoffId"`
	TaskID               string               `json:"taskId"`
	WorkflowRunID        string               `json:"workflowRunId"`
	ReworkOf             *string              `json:"reworkOf"` // null when none, as KXM's builder writes it
	Source               ManifestSource       `json:"source"`
	Target               ManifestTarget       `json:"target"`
	Intent               string               `json:"intent"`
	Status               string               `json:"status"`
	BaseCommit           string               `json:"baseCommit"`
	CandidateTreeHash    string               `json:"candidateTreeHash,omitempty"`
	Deliverables         ManifestDeliverables `json:"deliverables"`
	VerificationEvidence ManifestEvidence     `json:"verificationEvidence"`
	OpenQuestions        []string             `json:"openQuestions"`
	SuggestedNextStep    *ManifestNextStep    `json:"suggestedNextStep,omitempty"`
	CreatedAt            string               `json:"createdAt"`
}

// ManifestInput is a manifest as a create takes it: handoffId, status and
// createdAt are contextd's to set, so they are taken as any JSON value and
// never refused; every other member has KXM's type.
type ManifestInput struct {
	Schema               string               `json:"schema"`
	HandoffID            json.RawMessage      `json:"handoffId,omitempty"`
	TaskID               string               `json:"taskId"`
	WorkflowRunID        string               `json:"workflowRunId"`
	ReworkOf             *string              `json:"reworkOf"`
	Source               ManifestSource       `json:"source"`
	Target               ManifestTarget       `json:"target"`
	Intent               string               `json:"intent"`
	Status               json.RawMessage      `json:"status,omitempty"`
	BaseCommit           string               `json:"baseCommit"`
	CandidateTreeHash    string               `json:"candidateTreeHash"`
	Deliverables         ManifestDeliverables `json:"deliverables"`
	VerificationEvidence ManifestEvidence     `json:"verificationEvidence"`
	OpenQuestions        []string             `json:"openQuestions"`
	SuggestedNextStep    *ManifestNextStep    `json:"suggestedNextStep"`
	CreatedAt            json.RawMessage      `json:"createdAt,omitempty"`
}

// ManifestSource is the manifest's source.
type ManifestSource struct {
	Role      string `json:"role"`
	AgentID   string `json:"agentId"`
	Harness   string `json:"harness"`
	Model     string `json:"model,omitempty"`
	StepID    string `json:"stepId"`
	AttemptID string `json:"attemptId"`
}

// ManifestTarget is the manifest's target.
type ManifestTarget struct {
	Role       string `json:"role"`
	Permission string `json:"permission"`
}

// ManifestDeliverables are KXM's HandoffDeliverables.
type ManifestDeliverables struct {
	Patches   []string           `json:"patches"`
	Reports   []string           `json:"reports"`
	Artifacts []ManifestArtifact `json:"artifacts"`
}

// ManifestArtifact is one deliverable artifact: KXM has only its name and ref.
type ManifestArtifact struct {
	Name        string `json:"name"`
	ArtifactRef string `json:"artifactRef"`
}

// ManifestEvidence is KXM's HandoffVerificationEvidence.
type ManifestEvidence struct {
	WitnessExitCode *int              `json:"witnessExitCode"`
	WitnessPassed   *bool             `json:"witnessPassed"`
	CriticVerdicts  []ManifestVerdict `json:"criticVerdicts"`
}

// ManifestVerdict is KXM's CriticVerdict.
type ManifestVerdict struct {
	Critic  string `json:"critic"`
	Verdict string `json:"verdict"`
	Summary string `json:"summary,omitempty"`
}

// ManifestNextStep is the suggested next step.
type ManifestNextStep struct {
	StepID string `json:"stepId,omitempty"`
	Action string `json:"action,omitempty"`
}

// Lengths are the maxLength of KXM's schema, by JSON Pointer.
var Lengths = map[string]int{
	"/handoffId": 128, "/taskId": 128, "/workflowRunId": 128,
	"/source/role": 64, "/source/agentId": 64, "/source/harness": 64, "/source/model": 128,
	"/source/stepId": 64, "/source/attemptId": 128, "/target/role": 64,
	"/baseCommit": 64, "/candidateTreeHash": 64,
}

// IsManifest reports whether a JSON body is a KXM manifest (an object with
// a schema member, whatever its value: a contextd create has none).
func IsManifest(body []byte) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(body, &probe) != nil {
		return false
	}
	_, ok := probe["schema"]
	return ok
}

// CheckManifest checks a manifest a create was sent. It refuses only what
// KXM's schema would (a schema other than v1, a member over KXM's length),
// with pointers into the manifest; contextd's own rules follow in the
// service (see ManifestPointer). handoffId, status and createdAt are never
// refused: the warnings say what of them contextd replaced. Mapping the
// manifest onto contextd's handoff is the caller's (package handoff's type
// is not this pure package's to import).
func CheckManifest(in ManifestInput) ([]validation.Field, error) {
	var errs validation.List
	if in.Schema != ManifestSchema {
		errs.Add("/schema", "enum", "schema must be %s, not %q", ManifestSchema, in.Schema)
	}
	for _, f := range []struct{ ptr, s string }{{"/taskId", in.TaskID}, {"/workflowRunId", in.WorkflowRunID},
		{"/source/role", in.Source.Role}, {"/source/agentId", in.Source.AgentID}, {"/source/harness", in.Source.Harness},
		{"/source/model", in.Source.Model}, {"/source/stepId", in.Source.StepID}, {"/source/attemptId", in.Source.AttemptID},
		{"/target/role", in.Target.Role}, {"/baseCommit", in.BaseCommit}, {"/candidateTreeHash", in.CandidateTreeHash}} {
		if n := utf8.RuneCountInString(f.s); n > Lengths[f.ptr] {
			errs.Add(f.ptr, "too_long", "at most %d characters (KXM's schema), not %d", Lengths[f.ptr], n)
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return importWarnings(in), nil
}

// importWarnings says what of handoffId and status contextd replaced; a
// createdAt is always replaced by the time contextd stores the handoff.
func importWarnings(in ManifestInput) []validation.Field {
	var ws []validation.Field
	if id := rawText(in.HandoffID); id != "" {
		ws = append(ws, validation.Field{Pointer: "/handoffId", Code: "kxm_handoff_id_replaced",
			Detail: fmt.Sprintf("KXM's handoffId %s is not kept: the handoff's id is contextd's (the id member); use it for rework_of, accept, reject and reads", id)})
	}
	if st := rawText(in.Status); st != "" && st != "pending" {
		ws = append(ws, validation.Field{Pointer: "/status", Code: "kxm_status_ignored",
			Detail: fmt.Sprintf("status %s is not taken: a new handoff is pending; accept, reject and withdraw move it", st)})
	}
	return ws
}

// rawText is a raw member as text: a string's value, any other JSON as
// written, "" for absent or null.
func rawText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// ExportManifest completes a handoff's members, mapped one to one onto
// the manifest's (handoffId contextd's id, status the status contextd holds,
// reworkOf nil when none), into a manifest KXM's schema accepts: schema is
// v1, createdAt when contextd stored the handoff, the members KXM requires
// that the handoff lacks get the defaults above (MissingText, NoWitness,
// DefaultPermission, empty lists), texts over KXM's lengths are cut to
// them. contextd's own members (summary, decisions, packet_id, an
// artifact's kind and content_snippet) have no member here.
func ExportManifest(m Manifest, createdAt time.Time) Manifest {
	m.Schema, m.HandoffID, m.TaskID = ManifestSchema, cut(m.HandoffID, 128), cut(m.TaskID, 128)
	m.Status = ManifestStatus(m.Status)
	m.WorkflowRunID = orMissing(m.WorkflowRunID, 128)
	src := &m.Source
	src.Role, src.AgentID, src.Harness = orMissing(src.Role, 64), orMissing(src.AgentID, 64), orMissing(src.Harness, 64)
	src.Model, src.StepID, src.AttemptID = cut(src.Model, 128), orMissing(src.StepID, 64), orMissing(src.AttemptID, 128)
	m.Target.Role = cut(m.Target.Role, 64)
	if m.Target.Permission == "" {
		m.Target.Permission = DefaultPermission
	}
	m.BaseCommit, m.CandidateTreeHash = cut(m.BaseCommit, 64), cut(m.CandidateTreeHash, 64)
	d := &m.Deliverables
	d.Patches, d.Reports = nonNilStrings(d.Patches), nonNilStrings(d.Reports)
	if d.Artifacts == nil {
		d.Artifacts = []ManifestArtifact{}
	}
	ev := &m.VerificationEvidence
	if ev.WitnessExitCode == nil {
		n := NoWitness
		ev.WitnessExitCode = &n
	}
	if ev.WitnessPassed == nil {
		f := false
		ev.WitnessPassed = &f
	}
	if ev.CriticVerdicts == nil {
		ev.CriticVerdicts = []ManifestVerdict{}
	}
	m.OpenQuestions = nonNilStrings(m.OpenQuestions)
	m.CreatedAt = createdAt.UTC().Format(time.RFC3339Nano)
	return m
}

// ManifestStatus is a handoff's status as KXM's manifest spells it. KXM
// knows pending, accepted, rejected and superseded; a withdrawn handoff is
// superseded there, as contextd stored it before withdrawn was a status of
// its own: its work is replaced, not judged.
func ManifestStatus(status string) string {
	if status == "withdrawn" {
		return "superseded"
	}
	return status
}

// ManifestPointer turns a JSON Pointer into contextd's create input (snake_case)
// into the same place in the manifest as sent (camelCase): /task_id is
// /taskId, /verification_evidence/critic_verdicts/0/verdict is
// /verificationEvidence/criticVerdicts/0/verdict. A name that is not a
// pointer (a parameter) is left as it is.
func ManifestPointer(p string) string {
	if !strings.HasPrefix(p, "/") {
		return p
	}
	toks := strings.Split(p, "/")
	for i, t := range toks {
		parts := strings.Split(t, "_")
		for j := 1; j < len(parts); j++ {
			if parts[j] != "" {
				parts[j] = strings.ToUpper(parts[j][:1]) + parts[j][1:]
			}
		}
		toks[i] = strings.Join(parts, "")
	}
	return strings.Join(toks, "/")
}

func orMissing(s string, n int) string {
	if strings.TrimSpace(s) == "" {
		return MissingText
	}
	return cut(s, n)
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
