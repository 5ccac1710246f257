package server

import (
	"context"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/ledger"
	"github.com/contextd/contextd/internal/store"
)

// GetItemLedger implements api.StrictServerInterface.
func (s *Server) GetItemLedger(ctx context.Context, r api.GetItemLedgerRequestObject) (api.GetItemLedgerResponseObject, error) {
	limit, err := pageLimit(r.Params.Limit)
	if err != nil {
		return nil, err
	}
	l, err := s.ledger.Item(ctx, agentFrom(ctx), r.Project, r.Key, ledger.ItemParams{
		Project: deref(r.Params.Project), Cursor: deref(r.Params.Cursor), Limit: limit})
	if err != nil {
		return nil, err
	}
	out := api.GetItemLedger200JSONResponse{Project: l.Project, ItemProject: l.ItemProject, Key: l.Key,
		Totals: ledgerFigures(l.Totals), Versions: make([]api.LedgerVersion, len(l.Versions)), NextCursor: ptrIf(l.Next), Pending: l.Pending}
	for i, v := range l.Versions {
		f := ledgerFigures(v.LedgerFigures)
		out.Versions[i] = api.LedgerVersion{Version: v.Version, Offered: f.Offered, Included: f.Included, Excluded: f.Excluded,
			ExcludedBy: f.ExcludedBy, Tokens: f.Tokens, Outcomes: f.Outcomes, Answered: f.Answered, Used: f.Used,
			EarnRate: f.EarnRate, FailureRate: f.FailureRate}
	}
	return out, nil
}

// GetProjectLedger implements api.StrictServerInterface.
func (s *Server) GetProjectLedger(ctx context.Context, r api.GetProjectLedgerRequestObject) (api.GetProjectLedgerResponseObject, error) {
	limit, err := pageLimit(r.Params.Limit)
	if err != nil {
		return nil, err
	}
	l, err := s.ledger.List(ctx, agentFrom(ctx), r.Project, ledger.ListParams{
		Sort: deref(r.Params.Sort), Cursor: deref(r.Params.Cursor), Limit: limit})
	if err != nil {
		return nil, err
	}
	out := api.GetProjectLedger200JSONResponse{Project: l.Project, Sort: l.Sort, Data: make([]api.LedgerEntry, len(l.Entries)),
		NextCursor: ptrIf(l.Next), Pending: l.Pending}
	for i, e := range l.Entries {
		f := ledgerFigures(e.LedgerFigures)
		out.Data[i] = api.LedgerEntry{Project: e.Project, Key: e.Key, Offered: f.Offered, Included: f.Included, Excluded: f.Excluded,
			ExcludedBy: f.ExcludedBy, Tokens: f.Tokens, Outcomes: f.Outcomes, Answered: f.Answered, Used: f.Used,
			EarnRate: f.EarnRate, FailureRate: f.FailureRate}
	}
	return out, nil
}

// ledgerFigures is a ledger's figures on the wire, with the rates
// computed (absent without outcomes).
func ledgerFigures(lf store.LedgerFigures) api.LedgerFigures {
	f := api.LedgerFigures{Offered: lf.Offered, Included: lf.Included, Excluded: lf.Excluded, ExcludedBy: lf.ExcludedBy,
		Tokens: lf.Tokens, Outcomes: api.LedgerOutcomes{Success: lf.Successes, Failure: lf.Failures, Partial: lf.Partials},
		Answered: lf.Answered, Used: lf.Used}
	if f.ExcludedBy == nil {
		f.ExcludedBy = map[string]int64{}
	}
	if earn, fail, ok := lf.Rates(); ok {
		f.EarnRate, f.FailureRate = &earn, &fail
	}
	return f
}
