//go:build uitest

// The explorer in a real browser: headless Chromium driven by chromedp.
// These tests need Debian's chromium package (apt-get install chromium),
// so a build tag keeps them out of `make test`; `make test-ui` runs them.

package ui_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
)

// chromiumPath finds the browser: $CHROME_PATH, else the usual names.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROME_PATH"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("these tests need Chromium and found none: install it (Debian/Ubuntu: apt-get install chromium) or set CHROME_PATH")
	return ""
}

// tab is one browser tab with what its pages told the console.
type tab struct {
	t   *testing.T
	ctx context.Context
	mu  sync.Mutex
	// problems are console errors and warnings, uncaught exceptions and
	// the browser's own error messages (a CSP violation, a failed load).
	problems []string
}

// newTab starts a headless Chromium of its own for t.
func newTab(t *testing.T) *tab {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1440, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	b := &tab{t: t, ctx: ctx}
	require.NoError(t, chromedp.Do(ctx), "start Chromium")
	// Console errors and warnings, uncaught exceptions and the browser's
	// own messages (a CSP violation, a failed load) are problems.
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			switch m.Type {
			case chromedp.ConsoleError, chromedp.ConsoleWarning, chromedp.ConsoleException:
				b.note(fmt.Sprintf("%s (%s %s)", m, m.Source, m.URL))
			}
		}
	}()
	return b
}

func (b *tab) note(s string) {
	b.mu.Lock()
	b.problems = append(b.problems, s)
	b.mu.Unlock()
}

// run runs actions, failing the test on an error.
func (b *tab) run(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	require.NoError(b.t, chromedp.Do(b.ctx, actions...))
}

// get runs an action that returns a value.
func get[T any](b *tab, a chromedp.Action[T]) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, a)
	require.NoError(b.t, err)
	return v
}

// clean fails the test if anything reached the console since the last call.
func (b *tab) clean(what string) {
	b.t.Helper()
	time.Sleep(100 * time.Millisecond) // late console events of the page
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Empty(b.t, b.problems, "%s: the console is not clean", what)
	b.problems = nil
}

// forget drops what the console said (after a page meant to fail).
func (b *tab) forget() {
	time.Sleep(100 * time.Millisecond)
	b.mu.Lock()
	b.problems = nil
	b.mu.Unlock()
}

// signIn signs in through the form, as a person would.
func (b *tab) signIn(base, key string) {
	b.t.Helper()
	b.run(
		chromedp.Navigate(base+"/ui/login"),
		chromedp.WaitVisible(chromedp.CSS(`#key`)),
		chromedp.SendKeys(chromedp.CSS(`#key`), key),
		chromedp.Click(chromedp.CSS(`form[data-form="sign-in"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`header .who`)),
	)
	b.clean("sign-in")
}

// open navigates to a page of the explorer and waits for it.
func (b *tab) open(base, path string) {
	b.t.Helper()
	b.run(chromedp.Navigate(base+path), chromedp.WaitReady(chromedp.CSS(`main`)))
}

// text is the page's visible text.
func (b *tab) text() string {
	return get(b, chromedp.Evaluate[string](`document.body.innerText`))
}

// TestBrowserPagesLoadWithoutConsoleErrors: every page, the click on a
// span and the replay, without a console error, warning or exception
// (a CSP violation or a missing script would be one).
func TestBrowserPagesLoadWithoutConsoleErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.seed()
	b := newTab(t)
	b.signIn(e.url, w.admin)
	for _, p := range []string{"/ui", "/ui/projects/acme", "/ui/projects/acme?q=refunds", "/ui/projects/acme/packets/" + w.packet,
		"/ui/projects/acme/items/refunds", "/ui/projects/acme/tasks/" + w.task, "/ui/projects/_shared", "/ui/projects/acme/ledger"} {
		b.open(e.url, p)
		b.clean(p)
	}
	b.open(e.url, "/ui/projects/acme/packets/"+w.packet)
	b.run(
		chromedp.Click(chromedp.CSS(`[data-record="item:acme/refunds"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#detail[data-shown="item:acme/refunds"] .version`)),
		chromedp.Click(chromedp.CSS(`form[data-form="replay"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#replay-result`)),
	)
	require.Contains(t, b.text(), "Identical.")
	b.clean("span click and replay")
	title := get(b, chromedp.Title())
	require.Contains(t, title, w.packet)
}

// TestBrowserSuspectsLeadToTheAblationThatProvesThem: a failed answer
// that quoted refunds and an ablation without refunds that succeeded; the
// packet's page shows refunds first and causal, without a console
// problem, and its ablation link opens the ablation's page, whose link
// back opens the packet again.
func TestBrowserSuspectsLeadToTheAblationThatProvesThem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.seed()
	answer := "I looked it up. Refunds take three days. Ask for the order number."
	e.must(201, "POST", "/v1/projects/acme/packets/"+w.packet+"/outcomes", w.admin,
		api.RecordOutcomeJSONRequestBody{Status: "failure", Answer: &answer, Source: ptr("human")})
	abl := e.must(201, "POST", "/v1/projects/acme/packets/"+w.packet+"/ablations", w.admin,
		api.AblatePacketJSONRequestBody{Without: []api.AblationEntry{{Key: ptr("refunds")}}})["packet_id"].(string)
	e.must(201, "POST", "/v1/projects/acme/packets/"+abl+"/outcomes", w.admin,
		api.RecordOutcomeJSONRequestBody{Status: "success", Source: ptr("human")})
	b := newTab(t)
	b.signIn(e.url, w.planner)
	b.open(e.url, "/ui/projects/acme/packets/"+w.packet)
	b.clean("the packet page with suspects")
	first := get(b, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#suspects tbody tr:first-child td")).map(td => td.textContent)`))
	require.GreaterOrEqual(t, len(first), 5, "%v", first)
	require.Equal(t, []string{"item", "refunds", "2"}, first[:3])
	require.Equal(t, "causal", first[4])

	b.run(
		chromedp.Click(chromedp.CSS(`#suspects .evidence-ablation a`)),
		chromedp.WaitVisible(chromedp.CSS(`#ablation-of a`)),
	)
	require.Contains(t, get(b, chromedp.Title()), abl)
	b.clean("the ablation's page")
	b.run(
		chromedp.Click(chromedp.CSS(`#ablation-of a`)),
		chromedp.WaitVisible(chromedp.CSS(`#ablations a`)),
	)
	require.Contains(t, get(b, chromedp.Title()), w.packet)
	require.Equal(t, abl, get(b, chromedp.Text(chromedp.CSS(`#ablations a`))))
	b.clean("back to the packet")
}

// TestBrowserLedgerFollowsItsSortLinks: from the project page to its
// ledger, then a click on the tokens order lists the items as the API
// orders them, the order marked current; a row's link opens its item's
// page on its ledger. No console problem on the way.
func TestBrowserLedgerFollowsItsSortLinks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.seed()
	e.must(201, "POST", "/v1/projects/acme/packets/"+w.packet+"/outcomes", w.admin,
		api.RecordOutcomeJSONRequestBody{Status: "failure", Source: ptr("human")})
	var byTokens []string
	for _, d := range e.must(200, "GET", "/v1/projects/acme/ledger?sort=tokens", w.planner, nil)["data"].([]any) {
		m := d.(map[string]any)
		byTokens = append(byTokens, m["project"].(string)+"/"+m["key"].(string))
	}
	require.Len(t, byTokens, 3)
	b := newTab(t)
	b.signIn(e.url, w.planner)
	b.open(e.url, "/ui/projects/acme")
	b.run(
		chromedp.Click(chromedp.CSS(`a[data-link="ledger"]`)),
		chromedp.WaitVisible(chromedp.CSS(`nav.sorts [aria-current][data-sort="failure_rate"]`)),
	)
	b.clean("the ledger page")
	b.run(
		chromedp.Click(chromedp.CSS(`nav.sorts a[data-sort="tokens"]`)),
		chromedp.WaitVisible(chromedp.CSS(`nav.sorts [aria-current][data-sort="tokens"]`)),
	)
	rows := get(b, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#ledger tbody tr")).map(tr => tr.dataset.item)`))
	require.Equal(t, byTokens, rows)
	require.Contains(t, get(b, chromedp.Location()), "sort=tokens")
	b.clean("the ledger by tokens")
	b.run(
		chromedp.Click(chromedp.CSS(`#ledger tbody tr:first-child a`)),
		chromedp.WaitVisible(chromedp.CSS(`#item-ledger`)),
	)
	require.Contains(t, get(b, chromedp.Title()), strings.TrimPrefix(byTokens[0], "acme/"))
	b.clean("the item's ledger")
}

// TestBrowserClickOnASpanShowsTheItemVersion: every span's text is the
// rendered prompt's bytes [START, END) of its data-span; a click on the
// span of refunds shows version 2 as it was (not version 1), with its
// rule, rank and tokens, as the API records them.
func TestBrowserClickOnASpanShowsTheItemVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.seed()
	pk := e.must(200, "GET", "/v1/projects/acme/packets/"+w.packet, w.planner, nil)
	rendered := pk["rendered"].(string)
	b := newTab(t)
	b.signIn(e.url, w.planner)
	b.open(e.url, "/ui/projects/acme/packets/"+w.packet)

	spans := get(b, chromedp.Evaluate[[]map[string]string](`Array.from(document.querySelectorAll("#rendered [data-span]")).map(s => ({record: s.dataset.record, span: s.dataset.span, text: s.textContent}))`))
	require.NotEmpty(t, spans)
	seen := map[string]bool{}
	for _, s := range spans {
		var start, end int
		_, err := fmt.Sscanf(s["span"], "%d-%d", &start, &end)
		require.NoError(t, err, s["span"])
		require.Equal(t, rendered[start:end], s["text"], "span %s of %s", s["span"], s["record"])
		seen[s["record"]] = true
	}
	require.True(t, seen["item:acme/refunds"] && seen["item:acme/style"], "%v", seen)

	b.run(
		chromedp.Click(chromedp.CSS(`#rendered [data-record="item:acme/refunds"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#detail[data-shown="item:acme/refunds"] .version`)),
	)
	version := get(b, chromedp.Text(chromedp.CSS(`#detail .version`)))
	rule := get(b, chromedp.Text(chromedp.CSS(`#detail .rule`)))
	rank := get(b, chromedp.Text(chromedp.CSS(`#detail .rank`)))
	tokens := get(b, chromedp.Text(chromedp.CSS(`#detail .tokens`)))
	content := get(b, chromedp.Text(chromedp.CSS(`#detail pre.content`)))
	require.Equal(t, "2", version)
	require.Contains(t, content, "Refunds take three days.")
	require.NotContains(t, content, "five days")
	var rec map[string]any
	recs := e.must(200, "GET", "/v1/projects/acme/packets/"+w.packet+"/records", w.planner, nil)
	for _, r := range recs["data"].([]any) {
		if m := r.(map[string]any); m["key"] == "refunds" {
			rec = m
		}
	}
	require.NotNil(t, rec, "the API's record of refunds")
	require.Equal(t, fmt.Sprint(rec["rule"]), rule)
	require.Equal(t, strconv.Itoa(int(rec["rank"].(float64))), rank)
	require.Equal(t, strconv.Itoa(int(rec["tokens"].(float64))), tokens)

	// Another span replaces the panel.
	b.run(
		chromedp.Click(chromedp.CSS(`#rendered [data-record="item:acme/style"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#detail[data-shown="item:acme/style"] .version`)),
	)
	content = get(b, chromedp.Text(chromedp.CSS(`#detail pre.content`)))
	require.Equal(t, "Answer in plain English.", strings.TrimSpace(content))
	b.clean("clicks")
}

// TestBrowserHiddenItemIsAbsentForTheHiddenRole: the secret hidden from
// implementers appears nowhere an implementer looks (items, search, its
// packet, the item's own page), while an admin sees it.
func TestBrowserHiddenItemIsAbsentForTheHiddenRole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.seed()
	b := newTab(t)
	b.signIn(e.url, w.implementer)
	for _, p := range []string{"/ui/projects/acme", "/ui/projects/acme?q=launch", "/ui/projects/acme/packets/" + w.implPacket, "/ui/projects/acme/tasks/" + w.task} {
		b.open(e.url, p)
		html := get(b, chromedp.OuterHTML(chromedp.CSS(`html`)))
		require.NotContains(t, html, "secret", p)
		require.NotContains(t, html, "Launch", p)
		require.NotContains(t, html, "Friday", p)
		b.clean(p)
	}
	b.open(e.url, "/ui/projects/acme/items/secret")
	require.Contains(t, b.text(), "404")
	require.NotContains(t, b.text(), "Friday")
	b.forget() // the 404 itself is a failed load

	// The admin sees the secret, and the hidden record of the implementer's packet.
	a := newTab(t)
	a.signIn(e.url, w.admin)
	a.open(e.url, "/ui/projects/acme")
	require.Contains(t, a.text(), "secret")
	a.open(e.url, "/ui/projects/acme/packets/"+w.implPacket)
	reasons := get(a, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#excluded tr[data-record="item:acme/secret"] .reason')).map(e => e.textContent)`))
	require.Equal(t, []string{"hidden"}, reasons)
	a.open(e.url, "/ui/projects/acme/items/secret")
	require.Contains(t, a.text(), "The launch is on Friday.")
	a.clean("admin")
}

// writeWords are what a write control would say.
var writeWords = regexp.MustCompile(`(?i)\b(edit|delete|accept|reject|withdraw|save|update|revoke|redact)\b`)

// TestBrowserReadOnlyKeySeesNoWriteControl: on every page a read-only key
// reaches, the only forms are search and replay (sign-out is a link), the
// only POST replay, and no button, link or input offers to edit, delete,
// accept, reject or withdraw.
func TestBrowserReadOnlyKeySeesNoWriteControl(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.seed()
	b := newTab(t)
	b.open(e.url, "/ui/login")
	checkControls(t, b, "/ui/login", map[string]bool{"sign-in": true})
	b.signIn(e.url, w.planner)
	allowed := map[string]bool{"search": true, "replay": true}
	for _, p := range []string{"/ui", "/ui/projects/acme", "/ui/projects/acme?q=refunds", "/ui/projects/acme/packets/" + w.packet,
		"/ui/projects/acme/items/refunds", "/ui/projects/acme/tasks/" + w.task, "/ui/projects/acme/ledger"} {
		b.open(e.url, p)
		checkControls(t, b, p, allowed)
		b.clean(p)
	}
	// The task page shows rejections as history, never as a control.
	b.open(e.url, "/ui/projects/acme/tasks/"+w.task)
	require.Contains(t, b.text(), "needs tests")
}

// checkControls asserts the page's forms are among allowed (by
// data-form), POST only for replay and sign-out, and no control says a
// write word.
func checkControls(t *testing.T, b *tab, page string, allowed map[string]bool) {
	t.Helper()
	forms := get(b, chromedp.Evaluate[[]map[string]string](`Array.from(document.forms).map(f => ({kind: f.dataset.form || "", method: (f.getAttribute("method") || "get").toLowerCase(), action: f.getAttribute("action") || ""}))`))
	for _, f := range forms {
		require.True(t, allowed[f["kind"]], "%s: form %v", page, f)
		if f["method"] == "post" {
			require.Contains(t, []string{"replay", "sign-in"}, f["kind"], "%s: form %v", page, f)
		}
	}
	controls := get(b, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("button, input[type=submit], input[type=button], input[type=reset], [role=button], a")).map(c => (c.textContent || "") + " " + (c.value || "") + " " + (c.getAttribute("aria-label") || "") + " " + (c.getAttribute("title") || ""))`))
	for _, c := range controls {
		require.False(t, writeWords.MatchString(c), "%s: a write control: %q", page, c)
	}
	editable := get(b, chromedp.Evaluate[int](`document.querySelectorAll("textarea, [contenteditable], select").length`))
	require.Zero(t, editable, page)
}

// TestBrowserScreenshotOfThePacketPage writes docs/explorer.md's screenshot
// when CONTEXTD_UI_SCREENSHOT names the file (docs/packet-page.png):
// a packet with a span clicked.
func TestBrowserScreenshotOfThePacketPage(t *testing.T) {
	out := os.Getenv("CONTEXTD_UI_SCREENSHOT")
	if out == "" {
		t.Skip("set CONTEXTD_UI_SCREENSHOT=docs/packet-page.png to write the screenshot")
	}
	if !filepath.IsAbs(out) {
		out = filepath.Join("..", "..", out) // relative to the module's root
	}
	e := newEnv(t)
	w := e.seed()
	// More of a project than the other tests need: sections, a shared
	// default, a budget tight enough to leave some candidates out.
	always := &api.Trigger{Always: ptr(true)}
	e.must(201, "PUT", "/v1/projects/_shared/items/tone", e.admin, api.PutItemJSONRequestBody{Content: "Be brief and cite the item you rely on.", Trigger: always})
	e.must(201, "PUT", "/v1/projects/acme/items/queue.state", e.admin, api.PutItemJSONRequestBody{Kind: ptr("state"), Content: "Refund queue: 42 open, oldest 3 days.", Trigger: always})
	e.must(201, "PUT", "/v1/projects/acme/items/triage", e.admin, api.PutItemJSONRequestBody{Kind: ptr("skill"), Title: ptr("Triage a refund"), Content: "1. Find the order.\n2. Check the payment state.\n3. Answer with the expected date.", Trigger: always})
	for i, c := range []string{"Chargebacks go to finance, never to support.", "Gift cards are not refundable once redeemed.", "Orders older than a year need a manager's approval before any refund is made; write the ticket number in the answer."} {
		e.must(201, "PUT", fmt.Sprintf("/v1/projects/acme/items/policy.%d", i), e.admin, api.PutItemJSONRequestBody{Content: c, Priority: ptr(int32(3 - i)), Trigger: always})
	}
	e.must(201, "PUT", "/v1/projects/acme/items/refunds", e.admin, api.PutItemJSONRequestBody{Content: "Refunds take three working days.\nAsk for the order number.", Title: ptr("Refunds"),
		Priority: ptr(int32(5)), Trigger: always})
	p := e.must(201, "POST", "/v1/projects/acme/packets", e.admin, api.AssemblePacketJSONRequestBody{TargetRole: "planner", TokenBudget: ptr(150),
		Task: &taskRef{TaskId: ptr(w.task), Objective: ptr("Answer the customer's refund question")}, Query: ptr("refund")})
	b := newTab(t)
	b.signIn(e.url, w.admin)
	b.open(e.url, "/ui/projects/acme/packets/"+p["packet_id"].(string))
	b.run(
		chromedp.Click(chromedp.CSS(`#rendered [data-record="item:acme/refunds"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#detail[data-shown="item:acme/refunds"] .version`)),
	)
	png := get(b, chromedp.FullScreenshot(100))
	require.NoError(t, os.MkdirAll(filepath.Dir(out), 0o755))
	require.NoError(t, os.WriteFile(out, png, 0o644))
	t.Logf("wrote %s (%d bytes)", out, len(png))
}
