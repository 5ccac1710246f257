package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listen holds one LISTEN connection on channel until ctx ends, outside the
// pool, reconnecting with backoff. It calls connected after every
// (re)connect — notifications sent while it was away are gone, so the
// caller should look again — and notify with each payload.
func (s *Store) Listen(ctx context.Context, channel string, connected func(), notify func(payload string)) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize())
		}
		if err == nil {
			backoff = 100 * time.Millisecond
			connected()
			for {
				n, werr := conn.WaitForNotification(ctx)
				if werr != nil {
					break
				}
				notify(n.Payload)
			}
		}
		if conn != nil {
			closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = conn.Close(closeCtx)
			cancel()
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}
