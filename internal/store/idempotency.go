package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
)

// IdempotentAnswer is the stored answer to a request made with an
// Idempotency-Key: what a retry replays.
type IdempotentAnswer struct {
	AgentID, Key  string
	RequestSHA256 []byte
	Status        int
	ContentType   string
	Headers       map[string]string
	Body          []byte
	// MAC is the HMAC of the rest (Message), nil when the deployment has
	// no audit key.
	MAC []byte
}

// Message is the bytes an answer's MAC covers: "contextd-idempotency
// v1\n", then the agent, the key, the request's hash in hex, the status
// and the content type, each followed by a line feed (none of them can
// hold one), the headers as sorted JSON and a line feed, then the body.
func (a IdempotentAnswer) Message() []byte {
	hb, _ := json.Marshal(a.Headers) // map keys sorted
	return fmt.Appendf(nil, "contextd-idempotency v1\n%s\n%s\n%x\n%d\n%s\n%s\n%s", a.AgentID, a.Key, a.RequestSHA256, a.Status, a.ContentType, hb, a.Body)
}

// IdempotencyKeyTryLock claims (agent, key) for the transaction; false
// means another attempt holds it.
func (tx *Tx) IdempotencyKeyTryLock(ctx context.Context, agentID, key string) (bool, error) {
	ok, err := q.IdempotencyKeyTryLock(ctx, tx.ex, agentID+"/"+key)
	return ok, interpret(err)
}

// IdempotencyKeyGet is the unexpired answer stored for (agent, key).
func (db DB) IdempotencyKeyGet(ctx context.Context, agentID, key string) (IdempotentAnswer, error) {
	r, err := q.IdempotencyKeyGet(ctx, db.ex, dbsqlc.IdempotencyKeyGetParams{AgentID: agentID, Key: key})
	if err != nil {
		return IdempotentAnswer{}, interpret(err)
	}
	return answerOf(r), nil
}

// answerOf is a stored answer as the server replays it.
func answerOf(r dbsqlc.IdempotencyKey) IdempotentAnswer {
	a := IdempotentAnswer{AgentID: r.AgentID, Key: r.Key, RequestSHA256: r.RequestSha256, Status: int(r.Status), ContentType: r.ContentType, Body: r.Body, MAC: r.Mac}
	_ = json.Unmarshal(r.Headers, &a.Headers)
	return a
}

func answersOf(rows []dbsqlc.IdempotencyKey) []IdempotentAnswer {
	out := make([]IdempotentAnswer, len(rows))
	for i, r := range rows {
		out[i] = answerOf(r)
	}
	return out
}

// IdempotencyKeyPut stores the answer, replacing an expired one.
func (tx *Tx) IdempotencyKeyPut(ctx context.Context, a IdempotentAnswer) error {
	hb, _ := json.Marshal(a.Headers)
	return interpret(q.IdempotencyKeyUpsert(ctx, tx.ex, dbsqlc.IdempotencyKeyUpsertParams{
		AgentID: a.AgentID, Key: a.Key, RequestSha256: a.RequestSHA256, Status: int32(a.Status),
		ContentType: a.ContentType, Headers: hb, Body: a.Body, Mac: a.MAC,
	}))
}

// IdempotencyKeyDeleteExpired deletes answers older than 24 hours.
func (db DB) IdempotencyKeyDeleteExpired(ctx context.Context) (int64, error) {
	n, err := q.IdempotencyKeyDeleteExpired(ctx, db.ex)
	return n, interpret(err)
}

// IdempotencyAnswers is a page of the stored answers after (afterAgent,
// afterKey), expired ones included.
func (db DB) IdempotencyAnswers(ctx context.Context, afterAgent, afterKey string, limit int) ([]IdempotentAnswer, error) {
	rows, err := q.IdempotencyKeyPage(ctx, db.ex, dbsqlc.IdempotencyKeyPageParams{AfterAgent: afterAgent, AfterKey: afterKey, Lim: int32(limit)})
	if err != nil {
		return nil, interpret(err)
	}
	return answersOf(rows), nil
}
