package store

import (
	"context"
	"fmt"
	"time"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
)

// backfillPage is how many rows the backfill reads, and entries it
// appends, at a time.
const backfillPage = 1000

// BackfillAudit gives the chains data older than them (written before
// migration 00011) their entries, once: for each project without a chain,
// one transaction appends its project row, its item versions in the order
// they were written, its packets, its handoffs as they are now and its
// handoff events; the global chain gets the agents as they are now. A
// chain that has any entry is left alone. It reports the entries written.
func (s *Store) BackfillAudit(ctx context.Context) (int, error) {
	projects, err := q.AuditUnchained(ctx, s.DB.ex)
	if err != nil {
		return 0, interpret(err)
	}
	total := 0
	for _, p := range projects {
		err := s.InTx(ctx, func(tx *Tx) error {
			if fresh, err := tx.backfillClaim(ctx, p); err != nil || !fresh {
				return err
			}
			n, err := tx.backfillProject(ctx, p)
			total += n
			return err
		})
		if err != nil {
			return total, fmt.Errorf("backfill the audit chain of %s: %w", p, err)
		}
	}
	err = s.InTx(ctx, func(tx *Tx) error {
		if fresh, err := tx.backfillClaim(ctx, audit.GlobalChain); err != nil || !fresh {
			return err
		}
		for after := ""; ; {
			page, err := tx.AgentBodies(ctx, after, backfillPage)
			if err != nil {
				return err
			}
			for _, a := range page {
				tx.tc.entries = append(tx.tc.entries, pendingEntry{chain: audit.GlobalChain, kind: audit.KindAgent, subject: a.Subject, body: a.Body})
			}
			if err := tx.appendNow(ctx); err != nil || len(page) < backfillPage {
				total += len(page)
				return err
			}
			total += len(page)
			after = page[len(page)-1].Subject
		}
	})
	return total, err
}

// backfillClaim takes the backfill of chain for this transaction and
// reports whether the chain still has no entry (another process may have
// made it meanwhile).
func (tx *Tx) backfillClaim(ctx context.Context, chain string) (bool, error) {
	if err := q.AuditBackfillLock(ctx, tx.ex, chain); err != nil {
		return false, interpret(err)
	}
	seq, _, err := tx.AuditHead(ctx, chain)
	return seq == 0, err
}

// appendNow appends the entries gathered so far at once (the backfill's
// transactions are long; their entries go in pages, not at COMMIT).
func (tx *Tx) appendNow(ctx context.Context) error {
	es := tx.tc.entries
	tx.tc.entries = nil
	if len(es) == 0 {
		return nil
	}
	p := dbsqlc.AuditAppendParams{Chain: es[0].chain}
	for _, e := range es {
		p.Kinds, p.Subjects, p.Bodies = append(p.Kinds, e.kind), append(p.Subjects, e.subject), append(p.Bodies, e.body)
	}
	return interpret(q.AuditAppend(ctx, tx.ex, p))
}

func (tx *Tx) backfillProject(ctx context.Context, project string) (int, error) {
	n := 0
	add := func(kind, subject string, body []byte) error {
		tx.tc.entries = append(tx.tc.entries, pendingEntry{chain: project, kind: kind, subject: subject, body: body})
		n++
		if len(tx.tc.entries) >= backfillPage {
			return tx.appendNow(ctx)
		}
		return nil
	}
	body, err := tx.ProjectBody(ctx, project)
	if err != nil {
		return n, err
	}
	if err := add(audit.KindProject, project, body); err != nil {
		return n, err
	}
	for _, step := range []func(context.Context, string, func(string, string, []byte) error) error{
		tx.backfillVersions, tx.backfillPackets, tx.backfillHandoffs, tx.backfillEvents,
	} {
		if err := step(ctx, project, add); err != nil {
			return n, err
		}
	}
	return n, tx.appendNow(ctx)
}

func (tx *Tx) backfillVersions(ctx context.Context, project string, add func(string, string, []byte) error) error {
	p := dbsqlc.ItemVersionAuditPageParams{Project: project, AfterTime: time.Unix(0, 0).UTC().AddDate(-100, 0, 0), Lim: backfillPage}
	for {
		rows, err := q.ItemVersionAuditPage(ctx, tx.ex, p)
		if err != nil {
			return interpret(err)
		}
		for _, r := range rows {
			body := bodyOrMark(audit.ItemVersionBody(auditRowOfStored(dbsqlc.ItemVersionAuditRowsRow(r))))
			if err := add(audit.KindItemVersion, audit.ItemVersionSubject(r.Key, int(r.Version)), body); err != nil {
				return err
			}
		}
		if len(rows) < backfillPage {
			return nil
		}
		last := rows[len(rows)-1]
		p.AfterTime, p.AfterKey, p.AfterVersion = last.CreatedAt, last.Key, last.Version
	}
}

func (tx *Tx) backfillPackets(ctx context.Context, project string, add func(string, string, []byte) error) error {
	for after := ""; ; {
		ids, err := tx.PacketIDs(ctx, project, after, backfillPage)
		if err != nil {
			return err
		}
		bodies, err := tx.PacketBodies(ctx, project, ids)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if err := add(audit.KindPacket, id, bodies[id]); err != nil {
				return err
			}
		}
		if len(ids) < backfillPage {
			return nil
		}
		after = ids[len(ids)-1]
	}
}

func (tx *Tx) backfillHandoffs(ctx context.Context, project string, add func(string, string, []byte) error) error {
	for after := ""; ; {
		page, err := tx.HandoffBodies(ctx, project, after, backfillPage)
		if err != nil {
			return err
		}
		for _, h := range page {
			if err := add(audit.KindHandoff, h.Subject, h.Body); err != nil {
				return err
			}
		}
		if len(page) < backfillPage {
			return nil
		}
		after = page[len(page)-1].Subject
	}
}

func (tx *Tx) backfillEvents(ctx context.Context, project string, add func(string, string, []byte) error) error {
	for after := int64(0); ; {
		seqs, err := tx.HandoffEventSeqs(ctx, project, after, backfillPage)
		if err != nil {
			return err
		}
		bodies, err := tx.HandoffEventBodies(ctx, project, seqs)
		if err != nil {
			return err
		}
		for _, s := range seqs {
			sub := audit.HandoffEventSubject(s)
			if err := add(audit.KindHandoffEvent, sub, bodies[sub]); err != nil {
				return err
			}
		}
		if len(seqs) < backfillPage {
			return nil
		}
		after = seqs[len(seqs)-1]
	}
}
