package store

import (
	"context"
	"time"

	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
)

// UISession is a signed-in session of the provenance explorer (/ui); its
// token is stored only as a hash (migration 00021).
type UISession struct {
	TokenSHA256 []byte
	AgentID     string
	CreatedAt   time.Time
	LastSeenAt  time.Time
}

// UISessionInsert stores a new session begun at now.
func (db DB) UISessionInsert(ctx context.Context, tokenSHA256 []byte, agentID string, now time.Time) error {
	return interpret(q.UISessionInsert(ctx, db.ex, dbsqlc.UISessionInsertParams{TokenSha256: tokenSHA256, AgentID: agentID, Now: now}))
}

// UISessionGet is the session of a token hash (fault.ErrNotFound if none).
func (db DB) UISessionGet(ctx context.Context, tokenSHA256 []byte) (UISession, error) {
	r, err := q.UISessionGet(ctx, db.ex, tokenSHA256)
	if err != nil {
		return UISession{}, interpret(err)
	}
	return UISession{TokenSHA256: r.TokenSha256, AgentID: r.AgentID, CreatedAt: r.CreatedAt, LastSeenAt: r.LastSeenAt}, nil
}

// UISessionTouch records that the session was used at now (never moving
// its idle clock back).
func (db DB) UISessionTouch(ctx context.Context, tokenSHA256 []byte, now time.Time) error {
	return interpret(q.UISessionTouch(ctx, db.ex, dbsqlc.UISessionTouchParams{TokenSha256: tokenSHA256, Now: now}))
}

// UISessionDelete ends a session.
func (db DB) UISessionDelete(ctx context.Context, tokenSHA256 []byte) error {
	return interpret(q.UISessionDelete(ctx, db.ex, tokenSHA256))
}

// UISessionDeleteAgent ends every session of an agent.
func (db DB) UISessionDeleteAgent(ctx context.Context, agentID string) (int64, error) {
	n, err := q.UISessionDeleteAgent(ctx, db.ex, agentID)
	return n, interpret(err)
}

// UISessionDeleteExpired drops the sessions idle since before idleBefore
// or begun before createdBefore.
func (db DB) UISessionDeleteExpired(ctx context.Context, idleBefore, createdBefore time.Time) (int64, error) {
	n, err := q.UISessionDeleteExpired(ctx, db.ex, dbsqlc.UISessionDeleteExpiredParams{IdleBefore: idleBefore, CreatedBefore: createdBefore})
	return n, interpret(err)
}
