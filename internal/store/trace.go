package store

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// sqlTracer makes a span of every statement the pool runs (pgx's
// QueryTracer, BatchTracer and CopyFromTracer): a statement of a pipeline
// is a child of the batch's span. A span carries the statement's text
// (with the sqlc query name it starts with), never its arguments, which
// hold the items' content.
type sqlTracer struct{ t trace.Tracer }

var (
	_ pgx.QueryTracer    = sqlTracer{}
	_ pgx.BatchTracer    = sqlTracer{}
	_ pgx.CopyFromTracer = sqlTracer{}
)

var dbSystem = attribute.String("db.system.name", "postgresql")

// spanName is the sqlc name of a statement ("-- name: PacketInsert :exec"),
// or its first word (begin, commit, savepoint ...).
func spanName(sql string) string {
	sql = strings.TrimSpace(sql)
	if rest, ok := strings.CutPrefix(sql, "-- name: "); ok {
		if name, _, ok := strings.Cut(rest, " "); ok {
			return "sql " + name
		}
	}
	word, _, _ := strings.Cut(sql, " ")
	return "sql " + strings.ToLower(word)
}

func (s sqlTracer) start(ctx context.Context, sql string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	opts = append(opts, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(dbSystem, attribute.String("db.query.text", sql)))
	return s.t.Start(ctx, spanName(sql), opts...)
}

func end(span trace.Span, err error, opts ...trace.SpanEndOption) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(opts...)
}

func (s sqlTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	ctx, _ = s.start(ctx, data.SQL)
	return ctx
}

func (s sqlTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	end(trace.SpanFromContext(ctx), data.Err)
}

func (s sqlTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	ctx, span := s.t.Start(ctx, "sql pipeline", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(dbSystem))
	if data.Batch != nil {
		span.SetAttributes(attribute.Int("db.operation.batch.size", data.Batch.Len()))
	}
	return ctx
}

// statementParents are the contexts that queued a batch's statements, in
// the batch's order (nil: the batch's own); TraceBatchQuery, called once
// per statement in that order, takes the next.
type statementParents struct {
	ctxs []context.Context
	next int
}

type statementParentsKey struct{}

// withStatementParents gives a batch's context the contexts its statements
// were queued in, so a statement that waited for a later one (Tx.Pipeline,
// Tx.waitForNext) is traced under the stage that wrote it.
func withStatementParents(ctx context.Context, parents []context.Context) context.Context {
	for _, p := range parents {
		if p != nil {
			return context.WithValue(ctx, statementParentsKey{}, &statementParents{ctxs: parents})
		}
	}
	return ctx
}

// parentOf is the context a batch's next statement's span goes under.
func parentOf(ctx context.Context) context.Context {
	sp, _ := ctx.Value(statementParentsKey{}).(*statementParents)
	if sp == nil || sp.next >= len(sp.ctxs) {
		return ctx
	}
	p := sp.ctxs[sp.next]
	sp.next++
	if p == nil {
		return ctx
	}
	return p
}

// TraceBatchQuery is called once a statement's result is read: its span
// runs from when pgx began reading it, under the context that queued it.
func (s sqlTracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	start := data.ReadStartTime
	if start.IsZero() {
		start = time.Now()
	}
	_, span := s.start(parentOf(ctx), data.SQL, trace.WithTimestamp(start))
	end(span, data.Err)
}

func (s sqlTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	end(trace.SpanFromContext(ctx), data.Err)
}

func (s sqlTracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceCopyFromStartData) context.Context {
	ctx, _ = s.t.Start(ctx, "sql copy "+strings.Join(data.TableName, "."), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(dbSystem, attribute.String("db.collection.name", strings.Join(data.TableName, "."))))
	return ctx
}

func (s sqlTracer) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceCopyFromEndData) {
	end(trace.SpanFromContext(ctx), data.Err)
}
