package faulttest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"sync"

	"github.com/jackc/pgx/v5"
)

// findings are what the checks found wrong. lost counts acknowledged
// writes that are missing or not as acknowledged; other holds every other
// broken promise.
type findings struct {
	mu    sync.Mutex
	lost  []string
	other []string
}

func (f *findings) loss(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lost = append(f.lost, fmt.Sprintf(format, args...))
}

func (f *findings) bad(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.other = append(f.other, fmt.Sprintf(format, args...))
}

func (f *findings) empty() bool { return len(f.lost) == 0 && len(f.other) == 0 }

// parallel runs the checks four at a time.
func parallel(checks []func()) {
	todo := make(chan func())
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for check := range todo {
				check()
			}
		}()
	}
	for _, check := range checks {
		todo <- check
	}
	close(todo)
	wg.Wait()
}

// checkAPI reads back, through the API, what was acknowledged since the
// last check: each item version with its content, each packet with its
// text and records, each handoff with a status it may have and events
// that agree with it.
func checkAPI(ctx context.Context, c *client, led *ledger, project string, f *findings) {
	items, packets, handoffs := led.unchecked()
	base := "/v1/projects/" + project
	latest := map[string]int{}
	var checks []func()
	for _, it := range items {
		checks = append(checks, func() { checkItemAPI(ctx, c, base, it, f) })
		latest[it.key] = max(latest[it.key], it.version)
	}
	for key, v := range latest {
		checks = append(checks, func() {
			var got struct {
				Version int `json:"version"`
			}
			if a, err := c.get(ctx, base+"/items/"+url.PathEscape(key), &got); err != nil || got.Version < v {
				f.loss("item %s: latest is v%d, v%d was acknowledged: %v %s", key, got.Version, v, err, a)
			}
		})
	}
	for _, p := range packets {
		checks = append(checks, func() { checkPacketAPI(ctx, c, base, p, f) })
	}
	for _, h := range handoffs {
		checks = append(checks, func() { checkHandoffAPI(ctx, c, base, h, f) })
	}
	parallel(checks)
}

func checkItemAPI(ctx context.Context, c *client, base string, it itemAck, f *findings) {
	var got struct {
		Version int    `json:"version"`
		Content string `json:"content"`
		Deleted bool   `json:"deleted"`
	}
	if a, err := c.get(ctx, fmt.Sprintf("%s/items/%s/versions/%d", base, url.PathEscape(it.key), it.version), &got); err != nil {
		f.loss("item %s v%d: %v %s", it.key, it.version, err, a)
	} else if got.Version != it.version || got.Content != it.content || got.Deleted {
		f.loss("item %s v%d: content %q, acknowledged %q", it.key, it.version, got.Content, it.content)
	}
}

func checkPacketAPI(ctx context.Context, c *client, base string, p packetAck, f *findings) {
	var got struct {
		Rendered string `json:"rendered"`
		SHA      string `json:"rendered_sha256"`
	}
	if a, err := c.get(ctx, base+"/packets/"+p.id, &got); err != nil {
		f.loss("packet %s: %v %s", p.id, err, a)
		return
	}
	if got.Rendered != p.rendered || got.SHA != p.sha {
		f.loss("packet %s: text or hash differs from the acknowledged one", p.id)
	}
	var recs struct {
		Data []struct {
			Decision string `json:"decision"`
		} `json:"data"`
	}
	if a, err := c.get(ctx, base+"/packets/"+p.id+"/records", &recs); err != nil {
		f.loss("packet %s records: %v %s", p.id, err, a)
		return
	}
	included := 0
	for _, r := range recs.Data {
		if r.Decision == "included" {
			included++
		}
	}
	if len(recs.Data) == 0 || included != p.entries {
		f.loss("packet %s: %d records (%d included), its answer had %d entries", p.id, len(recs.Data), included, p.entries)
	}
}

func checkHandoffAPI(ctx context.Context, c *client, base string, h *handoffState, f *findings) {
	var got struct {
		Status string `json:"status"`
		Events []struct {
			Event    string `json:"event"`
			ToStatus string `json:"to_status"`
		} `json:"events"`
	}
	if a, err := c.get(ctx, base+"/handoffs/"+h.id, &got); err != nil {
		f.loss("handoff %s: %v %s", h.id, err, a)
		return
	}
	if !h.allowed[got.Status] {
		f.loss("handoff %s: status %s, acknowledged %s", h.id, got.Status, h.allowedList())
	}
	if n := len(got.Events); n == 0 || got.Events[0].Event != "created" || got.Events[n-1].ToStatus != got.Status {
		f.bad("handoff %s: status %s but events %+v", h.id, got.Status, got.Events)
	}
}

// checkAudit asks the server to verify the project's chain and the global
// one.
func checkAudit(ctx context.Context, c *client, project string, f *findings) (entries int64) {
	for _, path := range []string{"/v1/projects/" + project + "/audit/verify", "/v1/audit/verify"} {
		var v struct {
			OK      bool   `json:"ok"`
			Entries int64  `json:"entries"`
			Seq     int64  `json:"first_bad_seq"`
			Problem string `json:"problem"`
			Detail  string `json:"detail"`
		}
		if a, err := c.get(ctx, path, &v); err != nil {
			f.bad("%s: %v %s", path, err, a)
		} else if !v.OK {
			f.bad("%s: seq %d: %s: %s", path, v.Seq, v.Problem, v.Detail)
		} else if path != "/v1/audit/verify" {
			entries = v.Entries
		}
	}
	return entries
}

// checkSQL checks the database itself: every acknowledged write is there
// as acknowledged (cumulatively, over every cycle so far), the idempotent
// writes landed exactly once, no packet lacks its records, and no
// handoff's status disagrees with its events.
func checkSQL(ctx context.Context, dbURL, project string, led *ledger, f *findings) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, fn := range []func(context.Context, *pgx.Conn, string, *ledger, *findings) error{
		sqlInvariants, sqlItems, sqlPackets, sqlHandoffs,
	} {
		if err := fn(ctx, conn, project, led, f); err != nil {
			return err
		}
	}
	return nil
}

// sqlInvariants: no packet without records, no handoff whose status is not
// its last event's to-status, none without its created event.
func sqlInvariants(ctx context.Context, conn *pgx.Conn, _ string, _ *ledger, f *findings) error {
	queries := map[string]string{
		"packets without records": `SELECT p.project || '/' || p.id FROM packets p
			WHERE NOT EXISTS (SELECT 1 FROM packet_records r WHERE r.project = p.project AND r.packet_id = p.id)`,
		"handoffs whose status is not their last event's": `SELECT h.id || ' ' || h.status || ' last event ' || coalesce(e.to_status, 'none')
			FROM handoffs h LEFT JOIN LATERAL (SELECT to_status FROM handoff_events e
				WHERE e.project = h.project AND e.handoff_id = h.id ORDER BY seq DESC LIMIT 1) e ON true
			WHERE e.to_status IS DISTINCT FROM h.status`,
		"handoffs without a created event": `SELECT h.id FROM handoffs h WHERE NOT EXISTS (SELECT 1 FROM handoff_events e
			WHERE e.project = h.project AND e.handoff_id = h.id AND e.event = 'created')`,
	}
	for what, q := range queries {
		bad, err := strings1(ctx, conn, q)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		for _, b := range bad {
			f.bad("%s: %s", what, b)
		}
	}
	return nil
}

func strings1(ctx context.Context, conn *pgx.Conn, q string, args ...any) ([]string, error) {
	rows, err := conn.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// sqlItems: each acknowledged version holds its content and that
// content's hash; each item's versions are 1..n and the item row points at
// n.
func sqlItems(ctx context.Context, conn *pgx.Conn, project string, led *ledger, f *findings) error {
	type version struct {
		content string
		sha     []byte
	}
	stored := map[string]map[int]version{}
	rows, err := conn.Query(ctx, `SELECT key, version, content, content_sha256 FROM item_versions WHERE project = $1`, project)
	if err != nil {
		return err
	}
	var (
		key string
		n   int
		v   version
	)
	if _, err := pgx.ForEachRow(rows, []any{&key, &n, &v.content, &v.sha}, func() error {
		if stored[key] == nil {
			stored[key] = map[int]version{}
		}
		stored[key][n] = v
		return nil
	}); err != nil {
		return err
	}
	led.mu.Lock()
	for _, it := range led.items {
		got, ok := stored[it.key][it.version]
		if !ok || got.content != it.content {
			f.loss("item %s v%d: stored %q (present %v), acknowledged %q", it.key, it.version, got.content, ok, it.content)
		}
	}
	led.mu.Unlock()
	for key, vs := range stored {
		for n, v := range vs {
			if sum := sha256.Sum256([]byte(v.content)); hex.EncodeToString(sum[:]) != hex.EncodeToString(v.sha) {
				f.bad("item %s v%d: content_sha256 does not match its content", key, n)
			}
		}
	}
	bad, err := strings1(ctx, conn, `SELECT i.key || ' current ' || i.current_version || ', versions ' || count(v.version) || ', max ' || coalesce(max(v.version), 0)
		FROM items i LEFT JOIN item_versions v ON v.project = i.project AND v.key = i.key
		WHERE i.project = $1 GROUP BY i.key, i.current_version
		HAVING i.current_version <> coalesce(max(v.version), 0) OR count(v.version) <> coalesce(max(v.version), 0)`, project)
	for _, b := range bad {
		f.bad("item versions not 1..current: %s", b)
	}
	return err
}

// sqlPackets: each acknowledged packet is stored with its text and hash,
// and, every unanswered one having been retried with its key, the stored
// packets are exactly the acknowledged ones, one per task.
func sqlPackets(ctx context.Context, conn *pgx.Conn, project string, led *ledger, f *findings) error {
	type packet struct {
		id, rendered string
		sha          []byte
	}
	byTask := map[string][]packet{}
	rows, err := conn.Query(ctx, `SELECT task_id, id, rendered, rendered_sha256 FROM packets WHERE project = $1`, project)
	if err != nil {
		return err
	}
	var (
		task string
		p    packet
	)
	if _, err := pgx.ForEachRow(rows, []any{&task, &p.id, &p.rendered, &p.sha}, func() error {
		byTask[task] = append(byTask[task], p)
		return nil
	}); err != nil {
		return err
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	acked := map[string]bool{}
	for _, a := range led.packets {
		acked[a.task] = true
		got := byTask[a.task]
		switch {
		case len(got) == 0:
			f.loss("packet %s (task %s): not stored", a.id, a.task)
		case len(got) > 1:
			f.bad("task %s: %d packets, one was asked for with one Idempotency-Key", a.task, len(got))
		case got[0].id != a.id || got[0].rendered != a.rendered || hex.EncodeToString(got[0].sha) != a.sha:
			f.loss("packet %s: stored as %s with other text or hash", a.id, got[0].id)
		}
		if sum := sha256.Sum256([]byte(a.rendered)); hex.EncodeToString(sum[:]) != a.sha {
			f.bad("packet %s: rendered_sha256 is not the hash of its text", a.id)
		}
	}
	for task, ps := range byTask {
		if !acked[task] {
			f.bad("task %s: packet %s stored but never acknowledged, even on retry", task, ps[0].id)
		}
	}
	return nil
}

// sqlHandoffs: each acknowledged handoff is stored with a status it may
// have, and the handoffs of each task are exactly the creates sent for it.
func sqlHandoffs(ctx context.Context, conn *pgx.Conn, project string, led *ledger, f *findings) error {
	status := map[string]string{}
	perTask := map[string]int{}
	rows, err := conn.Query(ctx, `SELECT id, task_id, status FROM handoffs WHERE project = $1`, project)
	if err != nil {
		return err
	}
	var id, task, st string
	if _, err := pgx.ForEachRow(rows, []any{&id, &task, &st}, func() error {
		status[id] = st
		perTask[task]++
		return nil
	}); err != nil {
		return err
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	for _, h := range led.handoffs {
		got, ok := status[h.id]
		switch {
		case !ok:
			f.loss("handoff %s (task %s): not stored", h.id, h.task)
		case !h.allowed[got]:
			f.loss("handoff %s: status %s, acknowledged %s", h.id, got, h.allowedList())
		}
	}
	for task, n := range led.creates {
		perTask[task] -= n
	}
	for task, extra := range perTask {
		if extra != 0 {
			f.bad("task %s: %+d handoffs stored beyond the creates sent (each create with its own Idempotency-Key)", task, extra)
		}
	}
	return nil
}
