package server

import (
	"github.com/contextd/contextd/internal/handoff"
	"github.com/contextd/contextd/internal/kxm"
)

// The KXM edge of handoffs: package kxm owns the manifest's camelCase wire
// form and its rules (CheckManifest, ExportManifest); package handoff owns
// the handoff. kxm is pure and handoff is not (it imports store), so the
// member-by-member mapping between the two lives here, beside the handler
// that does both.

// fromKXMManifest is a checked KXM manifest (kxm.CheckManifest) as
// contextd's create input: its members one to one; handoffId, status and
// createdAt are contextd's to set, and KXM has none of summary, decisions,
// packet_id or an artifact's kind and content_snippet.
func fromKXMManifest(in kxm.ManifestInput) handoff.Manifest {
	m := handoff.Manifest{
		TaskID: in.TaskID, WorkflowRunID: in.WorkflowRunID, ReworkOf: deref(in.ReworkOf),
		Source: handoff.Source{Role: in.Source.Role, AgentID: in.Source.AgentID, Harness: in.Source.Harness, Model: in.Source.Model,
			StepID: in.Source.StepID, AttemptID: in.Source.AttemptID},
		Target: handoff.Target{Role: in.Target.Role, Permission: in.Target.Permission},
		Intent: in.Intent, BaseCommit: in.BaseCommit, CandidateTreeHash: in.CandidateTreeHash,
		Deliverables: handoff.Deliverables{Patches: in.Deliverables.Patches, Reports: in.Deliverables.Reports},
		VerificationEvidence: handoff.Evidence{WitnessExitCode: in.VerificationEvidence.WitnessExitCode,
			WitnessPassed: in.VerificationEvidence.WitnessPassed},
		OpenQuestions: in.OpenQuestions,
	}
	for _, a := range in.Deliverables.Artifacts {
		m.Deliverables.Artifacts = append(m.Deliverables.Artifacts, handoff.Artifact{Name: a.Name, ArtifactRef: a.ArtifactRef})
	}
	if vs := in.VerificationEvidence.CriticVerdicts; vs != nil {
		m.VerificationEvidence.CriticVerdicts = make([]handoff.Verdict, len(vs))
		for i, v := range vs {
			m.VerificationEvidence.CriticVerdicts[i] = handoff.Verdict{Critic: v.Critic, Verdict: v.Verdict, Summary: v.Summary}
		}
	}
	if n := in.SuggestedNextStep; n != nil {
		m.SuggestedNextStep = &handoff.NextStep{StepID: n.StepID, Action: n.Action}
	}
	return m
}

// toKXMManifest is a stored handoff as KXM's manifest: its members one to
// one, completed to what KXM's schema requires by kxm.ExportManifest.
func toKXMManifest(h *handoff.Handoff) kxm.Manifest {
	src, ev := h.Source, h.VerificationEvidence
	m := kxm.Manifest{
		HandoffID: h.ID, TaskID: h.TaskID, WorkflowRunID: h.WorkflowRunID, ReworkOf: ptrIf(h.ReworkOf),
		Source: kxm.ManifestSource{Role: src.Role, AgentID: src.AgentID, Harness: src.Harness, Model: src.Model,
			StepID: src.StepID, AttemptID: src.AttemptID},
		Target: kxm.ManifestTarget{Role: h.Target.Role, Permission: h.Target.Permission},
		Intent: h.Intent, Status: h.Status, BaseCommit: h.BaseCommit, CandidateTreeHash: h.CandidateTreeHash,
		Deliverables:         kxm.ManifestDeliverables{Patches: h.Deliverables.Patches, Reports: h.Deliverables.Reports},
		VerificationEvidence: kxm.ManifestEvidence{WitnessExitCode: ev.WitnessExitCode, WitnessPassed: ev.WitnessPassed},
		OpenQuestions:        h.OpenQuestions,
	}
	if as := h.Deliverables.Artifacts; as != nil {
		m.Deliverables.Artifacts = make([]kxm.ManifestArtifact, len(as))
		for i, a := range as {
			m.Deliverables.Artifacts[i] = kxm.ManifestArtifact{Name: a.Name, ArtifactRef: a.ArtifactRef}
		}
	}
	if vs := ev.CriticVerdicts; vs != nil {
		m.VerificationEvidence.CriticVerdicts = make([]kxm.ManifestVerdict, len(vs))
		for i, v := range vs {
			m.VerificationEvidence.CriticVerdicts[i] = kxm.ManifestVerdict{Critic: v.Critic, Verdict: v.Verdict, Summary: v.Summary}
		}
	}
	if n := h.SuggestedNextStep; n != nil {
		m.SuggestedNextStep = &kxm.ManifestNextStep{StepID: n.StepID, Action: n.Action}
	}
	return kxm.ExportManifest(m, h.CreatedAt)
}
