// Package faulttest proves, with the project's own tests, what contextd
// promises when things break: an acknowledged write survives, and a fault
// is answered honestly and quickly instead of hanging or failing as a bug.
//
// The other packages' tests run the server in-process, where a crash cannot
// happen between a COMMIT and its answer and the database never goes away.
// These tests build the real binary and treat it as an operator would:
//
//   - TestCrashSafety runs `contextd serve` as a separate process on a
//     database of its own, puts concurrent item, batch, packet and handoff
//     writes on it, SIGKILLs it at random moments (at least 20 times), starts
//     it again, and checks after every restart that every write that was
//     answered 2xx is there and intact, that retrying an unanswered write
//     with its Idempotency-Key lands it exactly once, that no packet lacks
//     its records, that no handoff's status disagrees with its events, and
//     that the audit chains verify.
//   - TestPostgresRestart runs the server on a private cluster
//     (internal/pgcluster), stops PostgreSQL in immediate mode under load
//     and starts it again on the same port, and checks that during the
//     outage /readyz and every request answer 503 (code unavailable) within
//     a few seconds, never 500 and never hang, that the service recovers by
//     itself once PostgreSQL is back, and that nothing acknowledged is lost.
//
// The package holds no product code; this file exists for this comment.
// The checks use only the HTTP API and SQL on the database.
package faulttest
