package evidence

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/ident"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// redactPage is how many packet uses one transaction of a redaction
// overwrites; MaxReason the longest reason.
const (
	redactPage = 100
	MaxReason  = 2000
)

// Errors of redaction.
var (
	ErrTombstone = fmt.Errorf("%w: a tombstone has no content to redact", fault.ErrInvalid)
)

// Redact removes version n of an item's content, proving it: see
// store.Tx.RedactionStart. It answers once the version, its chain entry
// and the idempotency answers are done; the packets that included it are
// overwritten after, in pages, by a goroutine of this process (and by any
// process that starts while the redaction is still running).
func (s *Service) Redact(ctx context.Context, agent *auth.Agent, proj, key string, n int, reason string) (store.Redaction, error) {
	if reason = strings.TrimSpace(reason); reason == "" || len(reason) > MaxReason {
		return store.Redaction{}, validation.One("reason", "required", "a redaction needs a reason of 1 to %d bytes", MaxReason)
	}
	var r store.Redaction
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := s.projects.AuthorizeIn(ctx, tx.DB, agent, proj, auth.Admin); err != nil {
			return err
		}
		if err := s.projects.Writable(ctx, tx, proj); err != nil {
			return err
		}
		v, err := tx.ItemVersionGet(ctx, proj, key, n)
		if errors.Is(err, fault.ErrNotFound) {
			return fmt.Errorf("%w: item %s has no version %d", fault.ErrNotFound, key, n)
		}
		if err != nil {
			return err
		}
		if v.Deleted {
			return ErrTombstone
		}
		pps, err := packetProjects(ctx, tx.DB, proj)
		if err != nil {
			return err
		}
		r, err = tx.RedactionStart(ctx, store.Redaction{Project: proj, ID: ident.New("red"), Key: key, Version: n,
			Reason: reason, CreatedBy: agent.ID, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}, pps)
		if err != nil {
			return err
		}
		return s.redactAnswers(ctx, tx, v.Content)
	})
	if errors.Is(err, fault.ErrConflict) {
		return store.Redaction{}, fmt.Errorf("%w: version %d of %s is redacted already", fault.ErrConflict, n, key)
	}
	if err != nil {
		return store.Redaction{}, err
	}
	go s.runRedaction(context.WithoutCancel(ctx), r)
	return r, nil
}

// redactAnswers rewrites the stored idempotency answers that hold text:
// the text becomes the marker, and the answer gets a fresh HMAC, so a retry
// replays the redacted answer instead of writing again (a client that
// resends the secret would store it anew).
func (s *Service) redactAnswers(ctx context.Context, tx *store.Tx, text string) error {
	as, err := tx.IdempotencyAnswersHolding(ctx, text)
	if err != nil {
		return err
	}
	// The text's hash goes too, as from the version (content_sha256 of
	// zeros): a short secret could be found again from it.
	sum := sha256.Sum256([]byte(text))
	hash, zeros := hex.EncodeToString(sum[:]), strings.Repeat("0", 2*sha256.Size)
	for _, a := range as {
		body := strings.ReplaceAll(string(a.Body), text, audit.RedactedContent)
		body = strings.ReplaceAll(body, store.JSONEscaped(text), audit.RedactedContent)
		a.Body = []byte(strings.ReplaceAll(body, hash, zeros))
		a.MAC = nil
		if s.keys != nil {
			a.MAC = s.keys.MAC(a.Message())
		}
		if err := tx.IdempotencyAnswerRewrite(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// Redaction is a redaction's progress (admin).
func (s *Service) Redaction(ctx context.Context, agent *auth.Agent, proj, id string) (store.Redaction, error) {
	if err := s.projects.AuthorizeIn(ctx, s.store.DB, agent, proj, auth.Admin); err != nil {
		return store.Redaction{}, err
	}
	r, err := s.store.RedactionGet(ctx, proj, id)
	if errors.Is(err, fault.ErrNotFound) {
		return store.Redaction{}, fmt.Errorf("%w: no redaction %s in %s", fault.ErrNotFound, id, proj)
	}
	return r, err
}

// ResumeRedactions finishes the redactions a stopped process left
// running. Two processes may both work on one: overwriting a span twice
// writes the same bytes.
func (s *Service) ResumeRedactions(ctx context.Context, log *slog.Logger) {
	rs, err := s.store.RedactionsRunning(ctx)
	if err != nil {
		log.Error("resume redactions", slog.Any("error", err))
		return
	}
	for _, r := range rs {
		s.runRedaction(ctx, r)
	}
}

// packetProjects are the projects whose packets may include an item of
// proj: proj, or every project for _shared.
func packetProjects(ctx context.Context, db store.DB, proj string) ([]string, error) {
	if proj != sharedProject {
		return []string{proj}, nil
	}
	var out []string
	for after := ""; ; {
		ps, err := db.ProjectList(ctx, store.ProjectListParams{After: after, All: true, Max: 1000})
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			out = append(out, p.Name)
		}
		if len(ps) < 1000 {
			return out, nil
		}
		after = ps[len(ps)-1].Name
	}
}

// sharedProject is the layer every project's packets read.
const sharedProject = "_shared"

// runRedaction overwrites the version's spans in every packet that
// included it, project by project and newest first, one page per
// transaction, and records the progress after each. A packet assembled in
// a transaction that began before the redaction committed may have read
// the text and be stored after the first pass went by, so the pass runs
// again once every such transaction has ended (they are bounded by the
// request timeout); a span overwritten twice gets the same bytes, and
// packets_done is what the last pass found.
func (s *Service) runRedaction(ctx context.Context, r store.Redaction) {
	fail := func(err error) {
		r.Status, r.Error = "failed", err.Error()
		_ = s.store.RedactionProgress(ctx, r)
	}
	began, err := s.store.ClockNow(ctx) // after the redaction committed
	if err != nil {
		fail(err)
		return
	}
	pass := func() bool {
		err := s.redactPass(ctx, &r)
		if err != nil && ctx.Err() == nil {
			fail(err)
		}
		return err == nil // else a process that starts later resumes it (ResumeRedactions)
	}
	if !pass() {
		return
	}
	for deadline := time.Now().Add(redactWaitMax); time.Now().Before(deadline); {
		n, err := s.store.TransactionsBegunBefore(ctx, began)
		if err != nil {
			fail(err)
			return
		}
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(redactWait):
		}
	}
	if !pass() {
		return
	}
	r.Status = "done"
	_ = s.store.RedactionProgress(ctx, r)
}

// redactWait is how often a redaction looks whether the transactions
// older than it have ended, and redactWaitMax how long it waits for them
// at most: past every request's timeout, so only a session outside
// contextd (an operator's open transaction) is not waited for.
const (
	redactWait    = 50 * time.Millisecond
	redactWaitMax = 5 * time.Minute
)

// redactPass is one pass of runRedaction over every packet project.
func (s *Service) redactPass(ctx context.Context, r *store.Redaction) error {
	pps, err := packetProjects(ctx, s.store.DB, r.Project)
	if err != nil {
		return err
	}
	r.PacketsDone = 0
	for _, pp := range pps {
		cur := store.RedactionCursor{Time: time.Now().Add(24 * time.Hour), ID: ""}
		for {
			var n int
			err := s.store.InTx(ctx, func(tx *store.Tx) error {
				var err error
				n, cur, err = tx.RedactPackets(ctx, *r, pp, cur, redactPage)
				return err
			})
			if err != nil {
				return err
			}
			r.PacketsDone += n
			if err := s.store.RedactionProgress(ctx, *r); err != nil {
				return err
			}
			if n < redactPage {
				break
			}
		}
	}
	return nil
}
