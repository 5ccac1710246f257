package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/fault"
)

// The readiness probe's bounds: it waits readyAcquire for a pooled
// connection and readyTimeout in all. A probe that queued behind an
// exhausted pool would answer late, and then 200, for a server that cannot
// serve; answering 503 at once takes it out of rotation instead.
const (
	readyAcquire = 500 * time.Millisecond
	readyTimeout = 2 * time.Second
)

// GetHealthz implements api.StrictServerInterface: the process answers.
func (s *Server) GetHealthz(ctx context.Context, _ api.GetHealthzRequestObject) (api.GetHealthzResponseObject, error) {
	return api.GetHealthz200JSONResponse{Status: "ok"}, nil
}

// GetReadyz implements api.StrictServerInterface: the pool has a
// connection free, the database answers on it, and its schema is current,
// all within readyTimeout.
func (s *Server) GetReadyz(ctx context.Context, _ api.GetReadyzRequestObject) (api.GetReadyzResponseObject, error) {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := s.store.Probe(ctx, readyAcquire); err != nil {
		if !errors.Is(err, fault.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", fault.ErrUnavailable, err)
		}
		return nil, notReady(ctx, err)
	}
	if s.ready != nil {
		if err := s.ready(ctx); err != nil {
			return nil, notReady(ctx, problem(503, "unavailable", "%v", err))
		}
	}
	return api.GetReadyz200JSONResponse{Status: "ready", Replica: s.replicaHealth(ctx)}, nil
}

// replicaHealth is the read replica's part of the probe: whether reads go
// to it and how far behind it is; nil (absent) when none is configured. A
// replica down or behind leaves the server ready: its reads go to the
// primary.
func (s *Server) replicaHealth(ctx context.Context) *api.ReplicaHealth {
	st, ok := s.store.ReplicaStatus(ctx)
	if !ok {
		return nil
	}
	out := &api.ReplicaHealth{InUse: st.InUse}
	if st.LagBytes >= 0 {
		out.LagBytes = &st.LagBytes
	}
	if st.LagSeconds >= 0 {
		out.LagSeconds = &st.LagSeconds
	}
	if st.Error != "" {
		out.Error = &st.Error
	}
	return out
}

// notReady is the probe's 503, saying why: the store's reason (pool
// exhausted) or else the probe's own deadline, when it passed.
func notReady(ctx context.Context, err error) error {
	if _, ok := fault.Reason(err); !ok && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return problem(503, "unavailable", "the database did not answer within %s", readyTimeout)
	}
	return err
}
