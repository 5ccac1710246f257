package pgtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
)

// MainWith is Main for a package whose tests share a fixture built once,
// before any test runs: a server its Example functions call, which get no
// *testing.T. setup is given a testing.TB that New and NewURL accept: its
// Fatal ends the process, its cleanups run after the tests, before the
// PostgreSQL harness stops. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.MainWith(m, func(tb testing.TB) { base = start(tb) }) }
func MainWith(m *testing.M, setup func(tb testing.TB)) {
	h.mainUsed = true
	tb := &mainTB{}
	tb.ctx, tb.cancel = context.WithCancel(context.Background())
	setup(tb)
	m.Run()
	tb.cleanup()
	if h.srv != nil {
		h.srv.close()
	}
}

// mainTB is the testing.TB of MainWith's setup. Only the methods below
// are called (by pgtest and by setups); the embedded TB is nil.
type mainTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
	ctx      context.Context
	cancel   context.CancelFunc
}

func (t *mainTB) Helper()                  {}
func (t *mainTB) Name() string             { return "TestMain" }
func (t *mainTB) Context() context.Context { return t.ctx }
func (t *mainTB) Logf(string, ...any)      {}

func (t *mainTB) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "TestMain: "+format+"\n", args...)
}

func (t *mainTB) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	t.FailNow()
}

// FailNow ends the process (what testify's require calls after Errorf).
func (t *mainTB) FailNow() {
	t.cleanup()
	if h.srv != nil {
		h.srv.close()
	}
	os.Exit(1)
}

func (t *mainTB) Fatal(args ...any) { t.Fatalf("%s", fmt.Sprint(args...)) }

func (t *mainTB) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// cleanup runs the cleanups, last registered first, as testing does.
func (t *mainTB) cleanup() {
	t.cancel()
	t.mu.Lock()
	fs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
