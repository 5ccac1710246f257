package store

import (
	"bytes"
	"context"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
)

// A Sealer signs a seal's message (audit.SealMessage) with the audit key.
// The store holds it rather than the key, so that no database code can
// read the key.
type Sealer func(msg []byte) []byte

// SealWith makes every transaction from now on seal the entries it
// appends (audit.Seal): call it once, before the store serves. Without
// it, entries go unsealed, as a deployment without an audit key writes
// them.
func (s *Store) SealWith(seal Sealer) {
	if seal == nil {
		s.sealer.Store(nil)
		return
	}
	s.sealer.Store(&seal)
}

// appendSealed appends es (sorted by chain) with the hashes computed
// here, each chain under its head's lock from the head's read to COMMIT
// (with everything that waits for COMMIT, which takes the project's
// counters first, as every writer does), and seals each chain's new
// entries: the signature needs the chain hash they end at, which only the
// head's read gives. The entries go by COPY from bulkAppendMin on (the
// function took ~330 ms of arrays and aggregate steps for 10,000), else
// with COMMIT; the head's move and the seal go with COMMIT. Without a
// sealer, a large transaction comes here too (appendEntries), unsealed.
func (tx *Tx) appendSealed(ctx context.Context, es []pendingEntry) error {
	tx.tc.sendAtCommitNext()
	bulk := len(es) >= bulkAppendMin
	for i := 0; i < len(es); {
		chain := es[i].chain
		head, err := q.AuditHeadLock(ctx, tx.ex, chain)
		if err != nil {
			return interpret(err)
		}
		first, seq, prev := head.Seq+1, head.Seq, head.Hash
		var rows []dbsqlc.AuditEntriesInsertManyParams
		for ; i < len(es) && es[i].chain == chain; i++ {
			e := audit.Hash(es[i].body)
			seq, prev = seq+1, audit.Link(prev, e)
			rows = append(rows, dbsqlc.AuditEntriesInsertManyParams{Chain: chain, Seq: seq, Kind: es[i].kind,
				Subject: es[i].subject, Body: es[i].body, EntryHash: e, ChainHash: prev})
		}
		if err := tx.insertEntries(ctx, bulk, rows); err != nil {
			return err
		}
		if err := q.AuditHeadSet(ctx, atCommitExec{tx.tc}, dbsqlc.AuditHeadSetParams{Seq: seq, Hash: prev, Chain: chain}); err != nil {
			return interpret(err)
		}
		if tx.seal == nil {
			continue
		}
		sig := tx.seal(audit.SealMessage(audit.SealWrite, chain, first, seq, prev))
		if err := q.AuditSealInsert(ctx, atCommitExec{tx.tc}, dbsqlc.AuditSealInsertParams{
			Chain: chain, Seq: seq, FirstSeq: first, Kind: audit.SealWrite, Signature: sig}); err != nil {
			return interpret(err)
		}
	}
	return nil
}

// insertEntries sends one chain's entries: by COPY now, or as one INSERT
// with COMMIT.
func (tx *Tx) insertEntries(ctx context.Context, bulk bool, rows []dbsqlc.AuditEntriesInsertManyParams) error {
	if bulk {
		_, err := q.AuditEntriesInsertMany(ctx, tx.ex, rows)
		return interpret(err)
	}
	p := dbsqlc.AuditEntriesInsertParams{Chain: rows[0].Chain}
	for _, r := range rows {
		p.Seqs, p.Kinds, p.Subjects = append(p.Seqs, r.Seq), append(p.Kinds, r.Kind), append(p.Subjects, r.Subject)
		p.Bodies, p.EntryHashes, p.ChainHashes = append(p.Bodies, r.Body), append(p.EntryHashes, r.EntryHash), append(p.ChainHashes, r.ChainHash)
	}
	return interpret(q.AuditEntriesInsert(ctx, atCommitExec{tx.tc}, p))
}

// Adopted is a chain a start seal adopted, through its head's seq.
type Adopted struct {
	Chain string
	Seq   int64
}

// AdoptChains gives every chain that has entries and no seal a start seal
// over them (audit.SealStart), and reports the chains it sealed. It signs
// whatever the database holds, so only two callers may: `serve`, in the
// process that made the schema of a fresh database (FreshDatabase), and
// an operator holding the key, `contextd audit adopt`, after checking the
// chains (best against a checkpoint taken before).
func (s *Store) AdoptChains(ctx context.Context, seal Sealer) ([]Adopted, error) {
	var out []Adopted
	err := s.InTx(ctx, func(tx *Tx) error {
		out = nil
		heads, err := q.AuditUnsealedHeads(ctx, tx.ex)
		if err != nil {
			return interpret(err)
		}
		for _, h := range heads {
			if err := tx.adopt(ctx, seal, h.Chain, h.Seq, h.Hash); err != nil {
				return err
			}
			out = append(out, Adopted{Chain: h.Chain, Seq: h.Seq})
		}
		return nil
	})
	return out, err
}

// EntrySealed reports whether the entry at seq of chain (within its head)
// is covered by a seal that check verifies: the seal at or after it whose
// first seq is at most seq, the chain hashes recomputed from the one
// before the entry through the entry's own body and the entry hashes up
// to the seal, and the signature over the last. A forged entry cannot
// lead to the chain hash a genuine seal signed. It proves one entry
// without walking the chain (a replay's proof of a redaction).
func (db DB) EntrySealed(ctx context.Context, chain string, seq int64, check audit.SealCheck) (bool, error) {
	seals, err := q.AuditSealCovering(ctx, db.ex, dbsqlc.AuditSealCoveringParams{Chain: chain, Seq: seq})
	if err != nil || len(seals) == 0 {
		return false, interpret(err)
	}
	s := seals[0]
	if s.FirstSeq > seq || s.Seq-seq >= 50_000 {
		return false, nil
	}
	es, err := db.AuditEntries(ctx, chain, max(seq-2, 0), int(s.Seq-max(seq-2, 0)))
	if err != nil {
		return false, err
	}
	prev := audit.Genesis
	for _, e := range es {
		switch {
		case e.Seq < seq:
			prev = e.ChainHash
		case e.Seq == seq && !bytes.Equal(audit.Hash(e.Body), e.EntryHash):
			return false, nil
		default:
			prev = audit.Link(prev, e.EntryHash)
		}
	}
	if len(es) == 0 || es[len(es)-1].Seq != s.Seq || (seq > 1 && es[0].Seq != seq-1) {
		return false, nil
	}
	return check(audit.SealMessage(s.Kind, chain, s.FirstSeq, s.Seq, prev), s.Signature), nil
}

// adopt gives chain a start seal over its entries 1 to seq, whose chain
// hash is head.
func (tx *Tx) adopt(ctx context.Context, seal Sealer, chain string, seq int64, head []byte) error {
	sig := seal(audit.SealMessage(audit.SealStart, chain, 1, seq, head))
	return interpret(q.AuditSealInsert(ctx, tx.ex, dbsqlc.AuditSealInsertParams{
		Chain: chain, Seq: seq, FirstSeq: 1, Kind: audit.SealStart, Signature: sig}))
}

// AdoptSharedRow gives the _shared chain a start seal when its one entry
// is the _shared project row the migrations wrote (seq 1, kind project,
// no seal): what every database has before a server with the key wrote
// anything there, whichever process migrated it. It reports whether it
// sealed. A database writer who cut _shared's chain back to that one
// entry has removed its history, which only a checkpoint shows anyway;
// what this seal vouches for is the _shared row's description.
func (s *Store) AdoptSharedRow(ctx context.Context, seal Sealer) (bool, error) {
	sealed := false
	err := s.InTx(ctx, func(tx *Tx) error {
		sealed = false
		heads, err := q.AuditUnsealedHeads(ctx, tx.ex)
		if err != nil {
			return interpret(err)
		}
		for _, h := range heads {
			if h.Chain != sharedChain || h.Seq != 1 {
				continue
			}
			es, err := tx.AuditEntries(ctx, h.Chain, 0, 1)
			if err != nil || len(es) != 1 || es[0].Kind != audit.KindProject {
				return err
			}
			sealed = true
			return tx.adopt(ctx, seal, h.Chain, 1, h.Hash)
		}
		return nil
	})
	return sealed, err
}

// sharedChain is the chain of the _shared project.
const sharedChain = "_shared"
