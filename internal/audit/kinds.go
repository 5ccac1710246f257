package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"time"
)

// Kinds of entries beyond item versions. Packets and handoff events are
// append-only: a body is checked against its row. Handoffs and projects
// change: their entries are the row after each change, and the last entry
// of each is checked against the row as it is now (Verifier.Current).
const (
	KindPacket       = "packet"
	KindHandoff      = "handoff"
	KindHandoffEvent = "handoff_event"
	KindProject      = "project"
)

// Mutable reports whether entries of kind stand for a row that changes.
func Mutable(kind string) bool {
	return kind == KindHandoff || kind == KindProject || kind == KindAgent || kind == KindPacketRedaction || kind == KindRolePolicy
}

// KindPacketRedaction is a packet's text after a redaction overwrote
// spans of it: the packet's own entry body is then a RedactedBody, and
// the last packet_redaction entry of the packet vouches for its text.
const KindPacketRedaction = "packet_redaction"

// PacketRedactionBody is a packet_redaction entry's body: project, id and
// the SHA-256 of the packet's text after the redaction.
func PacketRedactionBody(project, id string, renderedSHA256 []byte) ([]byte, error) {
	return newObject(KindPacketRedaction).str("project", project).str("id", id).hex("rendered_sha256", renderedSHA256).bytes()
}

// PacketRow is a packet as stored, with its records' bodies in order.
type PacketRow struct {
	Project, ID, CreatedBy, TargetRole, TaskID string
	CreatedAt                                  time.Time
	Request, Predecessors                      []byte
	Format, Tokenizer, Rendered                string
	RenderedSHA256                             []byte
	TokenBudget, TokensUsed                    int
	Gaps, ProvenanceSummary                    []byte
	Snapshot                                   string
	Pipeline                                   int
	BudgetCutoff                               []byte // JSON, or nil
	GapsMore                                   int
}

// RecordRow is one decision record of a packet as stored.
type RecordRow struct {
	Ord                                     int
	SubjectKind, SubjectProject, SubjectKey string
	SubjectVersion                          int
	Decision, Section                       string
	Position                                int
	SpanStart, SpanEnd                      *int32
	Tokens, Rank                            int
	Rule, Reason, Detail, Layer             string
	AdminOnly                               bool
}

// RecordsDigest is the SHA-256 of a packet's records: the concatenation of
// each record's canonical object (members in RecordRow's order, "entry"
// being "record") followed by a line feed, in ord order.
func RecordsDigest(rs []RecordRow) ([]byte, error) {
	h := sha256.New()
	var o object
	for _, r := range rs {
		// h.Write is done with b when it returns, so the next record reuses o.
		b, err := o.reset("record").int("ord", int64(r.Ord)).str("subject_kind", r.SubjectKind).
			str("subject_project", r.SubjectProject).str("subject_key", r.SubjectKey).
			int("subject_version", int64(r.SubjectVersion)).str("decision", r.Decision).str("section", r.Section).
			int("position", int64(r.Position)).optInt("span_start", r.SpanStart).optInt("span_end", r.SpanEnd).
			int("tokens", int64(r.Tokens)).int("rank", int64(r.Rank)).str("rule", r.Rule).str("reason", r.Reason).
			str("detail", r.Detail).str("layer", r.Layer).bool("admin_only", r.AdminOnly).bytes()
		if err != nil {
			return nil, err
		}
		h.Write(b)
		h.Write([]byte{'\n'})
	}
	return h.Sum(nil), nil
}

// PacketBody is a packet's entry body: its columns in PacketRow's order,
// the rendered text as its SHA-256 ("rendered_sha256_of") next to the
// stored "rendered_sha256", and "records_sha256" (RecordsDigest).
func PacketBody(p PacketRow, records []RecordRow) ([]byte, error) {
	digest, err := RecordsDigest(records)
	if err != nil {
		return nil, err
	}
	o := newObject(KindPacket).str("project", p.Project).str("id", p.ID).str("created_by", p.CreatedBy).
		str("target_role", p.TargetRole).str("task_id", p.TaskID).time("created_at", &p.CreatedAt).
		json("request", p.Request).json("predecessors", p.Predecessors).str("format", p.Format).
		str("tokenizer", p.Tokenizer).sha("rendered_sha256_of", p.Rendered).hex("rendered_sha256", p.RenderedSHA256).
		int("token_budget", int64(p.TokenBudget)).int("tokens_used", int64(p.TokensUsed)).json("gaps", p.Gaps).
		json("provenance_summary", p.ProvenanceSummary).str("snapshot", p.Snapshot).int("pipeline", int64(p.Pipeline))
	if p.BudgetCutoff == nil {
		o.raw("budget_cutoff", []byte("null"))
	} else {
		o.json("budget_cutoff", p.BudgetCutoff)
	}
	return o.int("gaps_more", int64(p.GapsMore)).hex("records_sha256", digest).bytes()
}

// HandoffRow is a handoff as stored.
type HandoffRow struct {
	Project, ID, TaskID, WorkflowRunID    string
	ReworkOf                              *string
	SourceRole, SourceAgentID, TargetRole string
	TargetPermission, Intent              string
	PacketID                              *string
	Manifest                              []byte
	CreatedBy                             string
	CreatedAt                             time.Time
	Status, StatusReason                  string
	SupersededBy                          *string
	UpdatedAt                             time.Time
}

// HandoffBody is a handoff's entry body: its columns in HandoffRow's order.
func HandoffBody(h HandoffRow) ([]byte, error) {
	return newObject(KindHandoff).str("project", h.Project).str("id", h.ID).str("task_id", h.TaskID).
		str("workflow_run_id", h.WorkflowRunID).optStr("rework_of", h.ReworkOf).str("source_role", h.SourceRole).
		str("source_agent_id", h.SourceAgentID).str("target_role", h.TargetRole).
		str("target_permission", h.TargetPermission).str("intent", h.Intent).optStr("packet_id", h.PacketID).
		json("manifest", h.Manifest).str("created_by", h.CreatedBy).time("created_at", &h.CreatedAt).
		str("status", h.Status).str("status_reason", h.StatusReason).optStr("superseded_by", h.SupersededBy).
		time("updated_at", &h.UpdatedAt).bytes()
}

// HandoffEventRow is a handoff event as stored.
type HandoffEventRow struct {
	Project                    string
	Seq                        int64
	HandoffID, Event           string
	FromStatus                 *string
	ToStatus, Actor, ActorRole string
	Reason                     string
	CreatedAt                  time.Time
}

// HandoffEventSubject names a handoff event: its seq among the project's
// events.
func HandoffEventSubject(seq int64) string { return strconv.FormatInt(seq, 10) }

// HandoffEventBody is a handoff event's entry body: its columns in
// HandoffEventRow's order.
func HandoffEventBody(e HandoffEventRow) ([]byte, error) {
	return newObject(KindHandoffEvent).str("project", e.Project).int("seq", e.Seq).str("handoff_id", e.HandoffID).
		str("event", e.Event).optStr("from_status", e.FromStatus).str("to_status", e.ToStatus).str("actor", e.Actor).
		str("actor_role", e.ActorRole).str("reason", e.Reason).time("created_at", &e.CreatedAt).bytes()
}

// ProjectRow is a project as stored.
type ProjectRow struct {
	Project, Description string
	CreatedAt, UpdatedAt time.Time
	// ArchivedAt and ArchivedBy are set while the project is archived;
	// RestoredAt and RestoredBy once it has been restored (migration
	// 00029).
	ArchivedAt, RestoredAt *time.Time
	ArchivedBy, RestoredBy *string
	// OnExcessAuthority is refuse or propose (migration 00036).
	OnExcessAuthority string
}

// ProjectBody is a project's entry body: its columns in ProjectRow's
// order, each of archived_at, archived_by, restored_at and restored_by
// only when set, so that the entries written before they existed, and
// those of a project never archived, stay what they were. The entry of an
// archive says who archived the project and when, that of a restore who
// restored it. on_excess_authority comes last, and only when it is not
// the default (refuse), for the same reason.
func ProjectBody(p ProjectRow) ([]byte, error) {
	var excess *string
	if p.OnExcessAuthority != "" && p.OnExcessAuthority != "refuse" {
		excess = &p.OnExcessAuthority
	}
	return newObject(KindProject).str("project", p.Project).str("description", p.Description).
		time("created_at", &p.CreatedAt).time("updated_at", &p.UpdatedAt).
		omitTime("archived_at", p.ArchivedAt).omitStr("archived_by", p.ArchivedBy).
		omitTime("restored_at", p.RestoredAt).omitStr("restored_by", p.RestoredBy).
		omitStr("on_excess_authority", excess).bytes()
}

// KindAgent is an agent (its authority and its key's hash) in the global
// chain, GlobalChain; like handoffs its entries are the row after each
// change.
const (
	KindAgent   = "agent"
	GlobalChain = ""
)

// AgentRow is an agent as stored.
type AgentRow struct {
	ID, Name, Role, Permission string
	Projects                   []string
	KeySHA256                  []byte
	CreatedAt                  time.Time
	CreatedBy                  *string
	RevokedAt                  *time.Time
	// MaxAuthority is nil for an agent made before its column existed
	// (migration 00017); its entries then lack the member, so that the
	// entries written before stay valid.
	MaxAuthority *string
}

// AgentBody is an agent's entry body: its columns in AgentRow's order,
// max_authority last and only when set.
func AgentBody(a AgentRow) ([]byte, error) {
	return newObject(KindAgent).str("id", a.ID).str("name", a.Name).str("role", a.Role).str("permission", a.Permission).
		strs("projects", a.Projects).hex("key_sha256", a.KeySHA256).time("created_at", &a.CreatedAt).
		optStr("created_by", a.CreatedBy).time("revoked_at", a.RevokedAt).omitStr("max_authority", a.MaxAuthority).bytes()
}

// KindRedaction is a redaction: who removed which version's content, when
// and why. Append-only; its body is checked against its row.
const KindRedaction = "redaction"

// RedactionRow is a redaction as stored (its progress aside).
type RedactionRow struct {
	Project, ID, Key string
	Version          int
	Reason           string
	CreatedBy        string
	CreatedAt        time.Time
}

// RedactionBody is a redaction's entry body: RedactionRow's members in
// order.
func RedactionBody(r RedactionRow) ([]byte, error) {
	return newObject(KindRedaction).str("project", r.Project).str("id", r.ID).str("key", r.Key).
		int("version", int64(r.Version)).str("reason", r.Reason).str("created_by", r.CreatedBy).
		time("created_at", &r.CreatedAt).bytes()
}

// RedactedBody replaces the body of an entry whose subject was redacted:
// {"entry":kind,"redacted":id,"subject":subject}. The entry keeps its
// hashes, so the chain still verifies; the redaction's own entry, later
// in the chain, must name the subject.
func RedactedBody(kind, subject, redaction string) []byte {
	b, _ := newObject(kind).str("redacted", redaction).str("subject", subject).bytes()
	return b
}

// redactedOf is the redaction and subject a body names, when it is a
// RedactedBody.
func redactedOf(body []byte) (redaction, subject string, ok bool) {
	var b struct {
		Entry    string `json:"entry"`
		Redacted string `json:"redacted"`
		Subject  string `json:"subject"`
	}
	if json.Unmarshal(body, &b) != nil || b.Redacted == "" {
		return "", "", false
	}
	return b.Redacted, b.Subject, bytes.Equal(body, RedactedBody(b.Entry, b.Subject, b.Redacted))
}
