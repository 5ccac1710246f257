package store

import "context"

// waitForNext runs fn with the statements it sends without reading an
// answer (every :exec query) waiting for the transaction's next statement
// that is sent, its COMMIT at the latest: Pipeline without the round trip
// at its end, for writes whose transaction sends nothing else before it
// commits (a packet stored alone: its row, its records, its audit entry
// and COMMIT go in one). As in Pipeline, their errors are reported by the
// call that sends them, so the transaction stays all or nothing.
func (t *Tx) waitForNext(ctx context.Context, fn func() error) error {
	return t.pipeline(ctx, fn, func(context.Context) error { return nil })
}
