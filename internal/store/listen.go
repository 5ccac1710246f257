package store

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// listenHeartbeat is how often a quiet LISTEN connection is pinged: a
// caller that relies on hearing every notification (Alive) learns within
// about this long that it may not be.
const listenHeartbeat = 300 * time.Millisecond

// Listen holds one LISTEN connection on channel until ctx ends, outside the
// pool, reconnecting with backoff. It calls connected after every
// (re)connect — notifications sent while it was away are gone, so the
// caller should look again — and notify with each payload. alive (which
// may be nil) is called whenever the connection has just proven itself:
// after connecting, after a notification, and after each answered ping of
// a quiet connection (every listenHeartbeat).
func (s *Store) Listen(ctx context.Context, channel string, connected func(), notify func(payload string), alive func()) {
	if alive == nil {
		alive = func() {}
	}
	backoff := 100 * time.Millisecond
	// Named, so that an operator (and a test) can tell it in pg_stat_activity.
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = ListenerName(channel)
	lost, ever := false, false // lost: and not back yet; ever: connected once
	for ctx.Err() == nil {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize())
		}
		if err == nil {
			backoff = 100 * time.Millisecond
			if lost {
				msg := "LISTEN connection back"
				if !ever {
					msg = "LISTEN connection made after failing"
				}
				s.log.Info(msg, slog.String("channel", channel))
				lost = false
			}
			ever = true
			connected()
			alive()
			for err == nil {
				if err = waitOne(ctx, conn, notify); err == nil {
					alive()
				}
			}
		}
		if ctx.Err() == nil && !lost {
			// An operator learns that changes made elsewhere are, for now,
			// seen only within the cache's short lifetime.
			msg := "LISTEN connection lost; reconnecting"
			if !ever {
				msg = "LISTEN connection failed; retrying"
			}
			s.log.Warn(msg, slog.String("channel", channel), slog.Any("error", err))
			lost = true
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

// ListenerName is the application_name of the LISTEN connection of channel.
func ListenerName(channel string) string { return "contextd listen " + channel }

// waitOne waits for one notification or one heartbeat: nil when the
// connection answered (a notification, or a ping of a quiet one), else why
// it did not.
func waitOne(ctx context.Context, conn *pgx.Conn, notify func(string)) error {
	wctx, cancel := context.WithTimeout(ctx, listenHeartbeat)
	n, err := conn.WaitForNotification(wctx)
	cancel()
	switch {
	case err == nil:
		notify(n.Payload)
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case wctx.Err() == nil: // the connection failed
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return conn.Ping(pctx)
}
