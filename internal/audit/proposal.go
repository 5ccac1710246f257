package audit

import (
	"strconv"
	"time"
)

// Kinds of a proposal (issue 37): a proposed item write, and its decision
// (promoted or rejected). Both are append-only: a body is checked against
// its row. Their subject is ProposalSubject.
const (
	KindProposal         = "proposal"
	KindProposalDecision = "proposal_decision"
)

// ProposalSubject names a proposal, and its decision: the item's key, "#"
// and the proposal's number ("#" is never in a key).
func ProposalSubject(key string, proposal int) string {
	return key + "#" + strconv.Itoa(proposal)
}

// ProposalRow is a proposal as stored.
type ProposalRow struct {
	Project, Key                     string
	Proposal                         int
	Seq                              int64
	BaseVersion                      int
	Cause, CauseDetail               string
	Fields                           []byte // JSON object
	FieldsSHA256                     []byte
	PromoterRoles                    []string
	CreatedAt                        time.Time
	CreatedBy, CreatedByName, ByRole string
}

// ProposalBody is a proposal's entry body: its columns in ProposalRow's
// order, the fields as the SHA-256 of their canonical JSON
// ("fields_canonical_sha256", so that the chain holds no content, as an
// item version's entry holds its content's hash) next to the stored
// "fields_sha256".
func ProposalBody(r ProposalRow) ([]byte, error) {
	canon, err := CanonicalJSON(r.Fields)
	if err != nil {
		return nil, err
	}
	return newObject(KindProposal).str("project", r.Project).str("key", r.Key).int("proposal", int64(r.Proposal)).
		int("seq", r.Seq).int("base_version", int64(r.BaseVersion)).str("cause", r.Cause).str("cause_detail", r.CauseDetail).
		sha("fields_canonical_sha256", string(canon)).hex("fields_sha256", r.FieldsSHA256).
		strs("promoter_roles", r.PromoterRoles).time("created_at", &r.CreatedAt).str("created_by", r.CreatedBy).
		str("created_by_name", r.CreatedByName).str("created_by_role", r.ByRole).bytes()
}

// ProposalDecisionRow is a proposal's decision as stored.
type ProposalDecisionRow struct {
	Project, Key               string
	Proposal                   int
	Seq                        int64
	Decision, Reason           string
	Version, SupersededVersion *int32
	Rebased                    bool
	CreatedAt                  time.Time
	CreatedBy, ByRole          string
}

// ProposalDecisionBody is a decision's entry body: its columns in
// ProposalDecisionRow's order.
func ProposalDecisionBody(r ProposalDecisionRow) ([]byte, error) {
	return newObject(KindProposalDecision).str("project", r.Project).str("key", r.Key).
		int("proposal", int64(r.Proposal)).int("seq", r.Seq).str("decision", r.Decision).str("reason", r.Reason).
		optInt("version", r.Version).optInt("superseded_version", r.SupersededVersion).bool("rebased", r.Rebased).
		time("created_at", &r.CreatedAt).str("created_by", r.CreatedBy).str("created_by_role", r.ByRole).bytes()
}
