package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
)

// OutcomeScope is where an outcome counts (migration 00033): a project's
// target role, and a task and step of it, or the role-wide scope when
// TaskID and StepID are "".
type OutcomeScope struct {
	Project, TargetRole, TaskID, StepID string
}

// Tally is how many outcomes were successes, failures and partials.
type Tally struct {
	Successes, Failures, Partials int
}

// Entry names one entry of a packet as its records do: the counters' key.
type Entry struct {
	Kind, Project, Key string
	Version            int
}

// EntryOf is the entry a record is about.
func EntryOf(r ctxtype.Record) Entry {
	return Entry{Kind: r.SubjectKind, Project: r.SubjectProject, Key: r.SubjectKey, Version: r.SubjectVersion}
}

// OutcomeCountersAdd counts one outcome of a packet, of a status, in the
// scopes given (the role-wide one first, the task's after): their totals,
// then the counts of every entry the packet included, each in one
// statement that locks its rows in key order, so that concurrent outcome
// writes sharing entries never deadlock. Nothing waits for their answers:
// both go with the transaction's next statement (its COMMIT, for an
// outcome write), which reports their error as its own, so they cost no
// round trip and hold their row locks no longer than before.
func (tx *Tx) OutcomeCountersAdd(ctx context.Context, packetID, status string, scopes []OutcomeScope) error {
	if len(scopes) == 0 {
		return nil
	}
	var s, f, p int64
	switch status {
	case "success":
		s = 1
	case "failure":
		f = 1
	case "partial":
		p = 1
	default:
		return fmt.Errorf("count outcome: unknown status %q", status)
	}
	tasks, steps := make([]string, len(scopes)), make([]string, len(scopes))
	for i, sc := range scopes {
		tasks[i], steps[i] = sc.TaskID, sc.StepID
	}
	proj, role := scopes[0].Project, scopes[0].TargetRole
	return interpret(tx.waitForNext(ctx, func() error {
		if err := q.OutcomeTotalsAdd(ctx, tx.ex, dbsqlc.OutcomeTotalsAddParams{Project: proj, TargetRole: role,
			Successes: s, Failures: f, Partials: p, TaskIds: tasks, StepIds: steps}); err != nil {
			return err
		}
		return q.OutcomeCountsAdd(ctx, tx.ex, dbsqlc.OutcomeCountsAddParams{Project: proj, TargetRole: role,
			Successes: s, Failures: f, Partials: p, TaskIds: tasks, StepIds: steps, PacketID: packetID})
	}))
}

// OutcomeTotals is a scope's totals (zero when it has no outcomes).
func (db DB) OutcomeTotals(ctx context.Context, sc OutcomeScope) (Tally, error) {
	rows, err := q.OutcomeTotalsGet(ctx, db.ex, dbsqlc.OutcomeTotalsGetParams{Project: sc.Project, TargetRole: sc.TargetRole,
		TaskID: sc.TaskID, StepID: sc.StepID})
	if err != nil || len(rows) == 0 {
		return Tally{}, interpret(err)
	}
	return Tally{Successes: int(rows[0].Successes), Failures: int(rows[0].Failures), Partials: int(rows[0].Partials)}, nil
}

// OutcomeCounts is the counts of some entries in a scope, in one query;
// an entry without outcomes in it is absent.
func (db DB) OutcomeCounts(ctx context.Context, sc OutcomeScope, entries []Entry) (map[Entry]Tally, error) {
	out := map[Entry]Tally{}
	if len(entries) == 0 {
		return out, nil
	}
	p := dbsqlc.OutcomeCountsGetParams{Project: sc.Project, TargetRole: sc.TargetRole, TaskID: sc.TaskID, StepID: sc.StepID,
		Kinds: make([]string, len(entries)), SubjectProjects: make([]string, len(entries)),
		SubjectKeys: make([]string, len(entries)), Versions: make([]int32, len(entries))}
	for i, e := range entries {
		p.Kinds[i], p.SubjectProjects[i], p.SubjectKeys[i], p.Versions[i] = e.Kind, e.Project, e.Key, int32(e.Version)
	}
	rows, err := q.OutcomeCountsGet(ctx, db.ex, p)
	if err != nil {
		return nil, interpret(err)
	}
	for _, r := range rows {
		out[Entry{Kind: r.SubjectKind, Project: r.SubjectProject, Key: r.SubjectKey, Version: int(r.SubjectVersion)}] =
			Tally{Successes: int(r.Successes), Failures: int(r.Failures), Partials: int(r.Partials)}
	}
	return out, nil
}

// PacketLastSuccessOfTask is the newest packet of a task and role made
// before a time (among the task's last 100 of that role, counterfactuals
// aside) that has a success outcome; "" when there is none.
func (db DB) PacketLastSuccessOfTask(ctx context.Context, project, taskID, role string, before time.Time) (string, error) {
	ids, err := q.PacketLastSuccessOfTask(ctx, db.ex, dbsqlc.PacketLastSuccessOfTaskParams{Project: project, TaskID: taskID,
		TargetRole: role, Before: before})
	if err != nil || len(ids) == 0 {
		return "", interpret(err)
	}
	return ids[0], nil
}

// JudgedAblation is a counterfactual of a packet that has outcomes: the
// entries it left out, and whether one of its outcomes is a success and
// one a failure or partial.
type JudgedAblation struct {
	ID                string
	Without           []ctxtype.Subject
	Succeeded, Failed bool
}

// PacketAblationsJudged is the ablations of a packet that have an outcome
// (the oldest max).
func (db DB) PacketAblationsJudged(ctx context.Context, project, packetID string, max int) ([]JudgedAblation, error) {
	rows, err := q.PacketAblationsJudged(ctx, db.ex, dbsqlc.PacketAblationsJudgedParams{Project: project, PacketID: packetID,
		Max: int32(max)})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]JudgedAblation, len(rows))
	for i, r := range rows {
		out[i] = JudgedAblation{ID: r.ID, Succeeded: r.Succeeded, Failed: r.Failed}
		if len(r.Without) > 0 && string(r.Without) != "null" {
			if err := json.Unmarshal(r.Without, &out[i].Without); err != nil {
				return nil, fmt.Errorf("decode ablation %s: %w", r.ID, err)
			}
		}
	}
	return out, nil
}
