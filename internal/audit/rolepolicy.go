package audit

import "time"

// KindRolePolicy is a role's policy in a project (issue 37; _shared's in
// _shared's chain). Like a project, its entries are the row after each
// change, and the last one is checked against the row as it is now
// (Verifier.Current); its subject is the role.
const KindRolePolicy = "role_policy"

// RolePolicyRow is a role policy as stored: a member the layer does not
// set is nil (MaxPerSection as its JSON text).
type RolePolicyRow struct {
	Project, Role        string
	Version              int
	TokenBudget          *int
	BudgetMax            bool
	Kinds                []string
	MaxPerSection        []byte
	Format, Tokenizer    *string
	CreatedAt, UpdatedAt time.Time
	CreatedBy, UpdatedBy string
}

// RolePolicyBody is a role policy's entry body: its columns in
// RolePolicyRow's order, an unset member as null.
func RolePolicyBody(r RolePolicyRow) ([]byte, error) {
	o := newObject(KindRolePolicy).str("project", r.Project).str("role", r.Role).int("version", int64(r.Version))
	if r.TokenBudget == nil {
		o.raw("token_budget", []byte("null"))
	} else {
		o.int("token_budget", int64(*r.TokenBudget))
	}
	o.bool("budget_max", r.BudgetMax)
	if r.Kinds == nil {
		o.raw("kinds", []byte("null"))
	} else {
		o.strs("kinds", r.Kinds)
	}
	if r.MaxPerSection == nil {
		o.raw("max_per_section", []byte("null"))
	} else {
		o.json("max_per_section", r.MaxPerSection)
	}
	return o.optStr("format", r.Format).optStr("tokenizer", r.Tokenizer).time("created_at", &r.CreatedAt).
		str("created_by", r.CreatedBy).time("updated_at", &r.UpdatedAt).str("updated_by", r.UpdatedBy).bytes()
}
