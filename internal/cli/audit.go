package cli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	apiclient "github.com/contextd/contextd/api/client"
	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/evidence"
)

func newAudit() *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Verify a project's audit chain and keep checkpoints of it"}
	cmd.AddCommand(newAuditVerify(), newAuditCheckpoint(), newAuditAdopt())
	return cmd
}

func newAuditCheckpoint() *cobra.Command {
	var f clientFlags
	var out string
	var global bool
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "Save a signed checkpoint of a project's chain head (keep it outside the database)",
		Example: `  contextd audit checkpoint --project acme --out acme-cp.json
  contextd audit checkpoint --global --out global-cp.json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := auditClient(&f, global)
			if err != nil {
				return err
			}
			var cp apiclient.AuditCheckpoint
			res, err := auditCheckpoint(cmd.Context(), c.Raw(), f.project)
			if err := c.ReadAnswer(res, err, &cp); err != nil {
				return err
			}
			ck := evidence.Checkpoint{Project: cp.Project, Seq: cp.Seq, Head: cp.Head, Time: cp.Time, Signature: cp.Signature, PublicKey: cp.PublicKey}
			if err := ck.VerifySignature(nil); err != nil {
				return err
			}
			b, _ := json.MarshalIndent(ck, "", "  ") // plain strings and a number
			if out == "" || out == "-" {
				_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return err
			}
			if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "checkpoint %s seq=%d head=%s saved to %s\n", ck.Project, ck.Seq, ck.Head, out)
			return nil
		},
	}
	f.registerWith(cmd, "project (env CONTEXTD_PROJECT), required")
	cmd.Flags().StringVar(&out, "out", "", "file to save the checkpoint to (default: print it)")
	cmd.Flags().BoolVar(&global, "global", false, "the global chain (agents and keys) instead of a project's")
	return cmd
}

func newAuditVerify() *cobra.Command {
	var f clientFlags
	var checkpoint, publicKey string
	var rows, global bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Recompute a project's chain on this side from the server's pages, and check it against a checkpoint",
		Long: `verify pages through the project's audit entries and recomputes every hash
here: each entry's hash from its body, each chain hash from the one before,
the seqs without a gap, and the head. With --rows (default) it also fetches
each item version and packet an entry covers and compares it with the entry.
With --checkpoint it checks the checkpoint's signature and that today's chain
still passes through its head, so a truncated or wholly rewritten chain is
caught even when every hash in it was recomputed. It checks every entry
against the seals of the deployment's audit key (the key of --public-key,
else the checkpoint's, else the one the server signs checkpoints with), so
entries added or rewritten by whoever could write the database but does not
hold the key are caught, after a checkpoint as before. Last, it asks the server
to check what only the database can show: the mutable rows (items,
handoffs, agents) against the chain, every row against an entry, and
(--global) every stored idempotency answer against its HMAC.

It prints "ok entries=N head=HEX" (and, with --checkpoint, a line saying the
checkpoint's signature and head were checked), or "bad seq=N problem=CODE:
detail" and exits non-zero.`,
		Example: `  contextd audit verify --project acme
  contextd audit verify --project acme --checkpoint acme-cp.json
  contextd audit verify --global --rows=false`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := auditClient(&f, global)
			if err != nil {
				return err
			}
			pub, err := parsePublicKey(publicKey)
			if err != nil {
				return err
			}
			var cp *evidence.Checkpoint
			if checkpoint != "" {
				if cp, err = readCheckpoint(checkpoint, f.project, pub); err != nil {
					return err
				}
			}
			if pub == nil {
				if pub, err = deploymentKey(cmd.Context(), c, f.project, cp); err != nil {
					return err
				}
			}
			res, err := verifyRemote(cmd.Context(), c, f.project, cp, pub, rows)
			if err != nil {
				return err
			}
			line := res.String()
			if res.Problem == nil && pub == nil {
				line += " (seals not checked: the server has no audit key)"
			}
			fmt.Fprintln(cmd.OutOrStdout(), line)
			if res.Problem != nil {
				return errSilentFailure
			}
			if cp != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "checkpoint %s: signature checked (public key %s); its head seq=%d %s of %s is on the chain\n",
					checkpoint, cp.PublicKey, cp.Seq, cp.Head, cp.Time)
			}
			return nil
		},
	}
	f.registerWith(cmd, "project (env CONTEXTD_PROJECT), required")
	cmd.Flags().StringVar(&checkpoint, "checkpoint", "", "a checkpoint saved by `contextd audit checkpoint` the chain must still extend")
	cmd.Flags().StringVar(&publicKey, "public-key", "", "the deployment's audit public key (base64, as checkpoints show it) to check seals and the checkpoint with")
	cmd.Flags().BoolVar(&rows, "rows", true, "also compare every item version and packet with its entry (one request each)")
	cmd.Flags().BoolVar(&global, "global", false, "the global chain (agents and keys) instead of a project's")
	return cmd
}

// errSilentFailure exits non-zero after the command printed why.
var errSilentFailure = errors.New("audit verification failed")

// auditClient is the client of an audit command: of a project's chain, or
// with --global of the global chain (agents and keys), whose project is "".
func auditClient(f *clientFlags, global bool) (*client, error) {
	if err := f.resolve(); err != nil {
		return nil, err
	}
	if global {
		f.project = audit.GlobalChain
	} else if f.project == "" {
		return nil, errors.New("--project is required (or set CONTEXTD_PROJECT), or --global for the chain of agents")
	}
	return f.client()
}

// auditCheckpoint, auditEntries and auditVerify call a project's chain, or
// the global chain's when the project is audit.GlobalChain.
func auditCheckpoint(ctx context.Context, raw *apiclient.Raw, project string) (*http.Response, error) {
	if project == audit.GlobalChain {
		return raw.GetGlobalAuditCheckpoint(ctx)
	}
	return raw.GetAuditCheckpoint(ctx, project)
}

func auditEntries(ctx context.Context, raw *apiclient.Raw, project string, after int64) (*http.Response, error) {
	limit := apiclient.Limit(1000)
	if project == audit.GlobalChain {
		return raw.ListGlobalAuditEntries(ctx, &apiclient.ListGlobalAuditEntriesParams{Limit: &limit, After: &after})
	}
	return raw.ListAuditEntries(ctx, project, &apiclient.ListAuditEntriesParams{Limit: &limit, After: &after})
}

func auditVerify(ctx context.Context, raw *apiclient.Raw, project string) (*http.Response, error) {
	if project == audit.GlobalChain {
		return raw.VerifyGlobalAudit(ctx)
	}
	return raw.VerifyAudit(ctx, project)
}

// parsePublicKey reads --public-key (nil when empty).
func parsePublicKey(text string) (ed25519.PublicKey, error) {
	if text == "" {
		return nil, nil
	}
	pub, err := evidence.ParsePublicKey(text)
	if err != nil {
		return nil, fmt.Errorf("--public-key: %w", err)
	}
	return pub, nil
}

// deploymentKey is the public key seals are checked with when
// --public-key is not given: the checkpoint's (whose signature was
// checked), else the one the server signs with now (nil when it has no
// key: its entries are unsealed).
func deploymentKey(ctx context.Context, c *client, project string, cp *evidence.Checkpoint) (ed25519.PublicKey, error) {
	text := ""
	if cp != nil {
		text = cp.PublicKey
	} else {
		var now apiclient.AuditCheckpoint
		res, err := auditCheckpoint(ctx, c.Raw(), project)
		err = c.ReadAnswer(res, err, &now)
		if isStatus(err, http.StatusServiceUnavailable) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		text = now.PublicKey
	}
	pub, err := evidence.ParsePublicKey(text)
	if err != nil {
		return nil, fmt.Errorf("the deployment's public key: %w", err)
	}
	return pub, nil
}

func readCheckpoint(path, project string, pub ed25519.PublicKey) (*evidence.Checkpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cp evidence.Checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if cp.Project != project {
		return nil, fmt.Errorf("checkpoint %s is of project %q, not %q", path, cp.Project, project)
	}
	if err := cp.VerifySignature(pub); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return &cp, nil
}

// verifyRemote recomputes the chain from the server's pages: see
// newAuditVerify.
func verifyRemote(ctx context.Context, c *client, project string, cp *evidence.Checkpoint, pub ed25519.PublicKey, rows bool) (evidence.Result, error) {
	v := audit.NewVerifier()
	if pub != nil {
		v.RequireSeals(project, evidence.SealCheck(pub))
	}
	var headSeq int64
	var headHash string
	for after := int64(0); ; {
		var page apiclient.AuditEntryList
		res, err := auditEntries(ctx, c.Raw(), project, after)
		if err := c.ReadAnswer(res, err, &page); err != nil {
			return evidence.Result{}, err
		}
		if after == 0 {
			headSeq, headHash = page.Head.Seq, page.Head.Hash // entries written while paging are left out
		}
		for _, ae := range page.Data {
			if ae.Seq > headSeq {
				break
			}
			e, err := entryOf(ae)
			if err != nil {
				return problemAt(ae.Seq, audit.ContentChanged, err.Error()), nil
			}
			now := e.Body // without --rows, only the chain itself is checked
			if rows {
				if now, err = remoteBody(ctx, c, project, e); err != nil {
					return evidence.Result{}, err
				}
			}
			if !v.Entry(e, now) {
				return evidence.Result{Problem: v.Problem()}, nil
			}
			if cp != nil && e.Seq == cp.Seq {
				if hex.EncodeToString(e.ChainHash) != cp.Head {
					return problemAt(e.Seq, audit.ContentChanged, fmt.Sprintf("the chain no longer passes through the checkpoint's head %s of %s", cp.Head, cp.Time)), nil
				}
				v.Trust(e.Seq) // the checkpoint's signature proves what leads to it
			}
		}
		if len(page.Data) == 0 || page.NextAfter == nil || page.Data[len(page.Data)-1].Seq >= headSeq {
			break
		}
		after = *page.NextAfter
	}
	head, _ := hex.DecodeString(headHash)
	if !v.AtHead(headSeq, head) {
		return evidence.Result{Problem: v.Problem()}, nil
	}
	if cp != nil && cp.Seq > headSeq {
		return problemAt(headSeq+1, audit.EntryMissing, fmt.Sprintf("the checkpoint of %s is at seq %d, the chain ends at seq %d", cp.Time, cp.Seq, headSeq)), nil
	}
	var server apiclient.AuditVerification
	res, err := auditVerify(ctx, c.Raw(), project)
	if err := c.ReadAnswer(res, err, &server); err != nil {
		return evidence.Result{}, err
	}
	// With a checkpoint, the seals were checked here with what it proves
	// (entries written before the deployment had a key); the server, which
	// knows of no checkpoint, reports those entries unsealed, and only
	// after every other check passed.
	sealsHere := cp != nil && pub != nil && server.Problem != nil && *server.Problem == audit.Unsealed
	if !server.Ok && server.Problem != nil && !sealsHere {
		// What only the database can show (mutable rows, rows without an
		// entry); the hashes above were recomputed here.
		return problemAt(derefInt(server.FirstBadSeq), *server.Problem, deref(server.Detail)+" (found by the server)"), nil
	}
	if !v.SealedToEnd() {
		return evidence.Result{Problem: v.Problem()}, nil
	}
	return evidence.Result{Entries: v.Entries(), Head: v.Head(), Sealed: pub != nil, Adopted: v.Adopted()}, nil
}

func problemAt(seq int64, code, detail string) evidence.Result {
	return evidence.Result{Problem: &audit.Problem{Seq: seq, Code: code, Detail: detail}}
}

func derefInt(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func entryOf(ae apiclient.AuditEntry) (audit.Entry, error) {
	eh, err1 := hex.DecodeString(ae.EntryHash)
	ch, err2 := hex.DecodeString(ae.ChainHash)
	if err := errors.Join(err1, err2); err != nil {
		return audit.Entry{}, fmt.Errorf("entry %d: hashes are not hex", ae.Seq)
	}
	e := audit.Entry{Seq: ae.Seq, Kind: ae.Kind, Subject: ae.Subject, Body: ae.Body, EntryHash: eh, ChainHash: ch}
	if s := ae.Seal; s != nil {
		e.Seal = &audit.Seal{First: s.FirstSeq, Kind: string(s.Kind), Signature: s.Signature}
	}
	return e, nil
}

// remoteBody is the body an entry should have, with the members the API
// shows of the row it covers put in from the API's answer: equal to the
// entry's body when the row still says what was written. Entries of other
// kinds (handoffs, events, the project) are checked by their hashes here
// and against their rows by the server.
func remoteBody(ctx context.Context, c *client, project string, e audit.Entry) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(e.Body, &fields); err != nil {
		return []byte("unreadable body"), nil
	}
	var err error
	if _, redacted := fields["redacted"]; redacted {
		if e.Kind != audit.KindItemVersion {
			return e.Body, nil // its place in the chain is what can be checked
		}
		now, err := redactedVersion(ctx, c, project, e.Subject)
		if isStatus(err, http.StatusNotFound) {
			return nil, nil // gone
		}
		return now, err
	}
	switch e.Kind {
	case audit.KindItemVersion:
		err = fillItemVersion(ctx, c, project, e.Subject, fields)
	case audit.KindPacket:
		err = fillPacket(ctx, c, project, e.Subject, fields)
	default:
		return e.Body, nil
	}
	if isStatus(err, http.StatusNotFound) {
		return nil, nil // gone
	}
	if err != nil {
		return nil, err
	}
	return reencode(e.Body, fields), nil
}

// redactedVersion is what a redacted version's row must show: its content
// hashed, and its stored hash (the marker and zeros, unless someone put
// content back).
func redactedVersion(ctx context.Context, c *client, project, subject string) ([]byte, error) {
	i := strings.LastIndexByte(subject, '@')
	if i < 0 {
		return nil, nil
	}
	it, err := itemVersion(ctx, c, project, subject[:i], subject[i+1:])
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(it.Content))
	return json.Marshal(map[string]string{"content_sha256_of": hex.EncodeToString(sum[:]), "content_sha256": it.ContentSha256})
}

func fillItemVersion(ctx context.Context, c *client, project, subject string, f map[string]json.RawMessage) error {
	i := strings.LastIndexByte(subject, '@')
	if i < 0 {
		return nil
	}
	var deleted bool
	_ = json.Unmarshal(f["deleted"], &deleted)
	if deleted {
		return nil // a tombstone has no answer of its own; its hashes are checked
	}
	it, err := itemVersion(ctx, c, project, subject[:i], subject[i+1:])
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(it.Content))
	set(f, "key", it.Key)
	set(f, "version", it.Version)
	set(f, "kind", it.Kind)
	set(f, "source", it.Source)
	set(f, "title", it.Title)
	set(f, "summary", it.Summary)
	set(f, "content_sha256_of", hex.EncodeToString(sum[:]))
	set(f, "content_sha256", it.ContentSha256)
	set(f, "priority", it.Priority)
	set(f, "authority", it.Authority)
	set(f, "confidence", it.Confidence)
	set(f, "state_key", it.StateKey)
	set(f, "slot", it.Slot)
	set(f, "template", it.Template)
	set(f, "tokens_o200k", it.Tokens)
	set(f, "tokens_cl100k", it.TokensCl100kBase)
	set(f, "created_by", it.CreatedBy)
	set(f, "created_at", *audit.Time(&it.CreatedAt))
	if m, err := audit.CanonicalJSON(it.Metadata); err == nil {
		f["metadata"] = m
	}
	return nil
}

// itemVersion is the version of an entry's subject (KEY@VERSION).
func itemVersion(ctx context.Context, c *client, project, key, version string) (*apiclient.Item, error) {
	v, err := strconv.ParseInt(version, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("item version %s@%s: not a version", key, version)
	}
	var it apiclient.Item
	res, err := c.Raw().GetItemVersion(ctx, project, key, int32(v))
	if err := c.ReadAnswer(res, err, &it); err != nil {
		return nil, err
	}
	return &it, nil
}

func fillPacket(ctx context.Context, c *client, project, id string, f map[string]json.RawMessage) error {
	p, err := c.Packet(ctx, project, id)
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(p.Rendered))
	set(f, "id", p.PacketId)
	set(f, "rendered_sha256_of", hex.EncodeToString(sum[:]))
	set(f, "rendered_sha256", p.RenderedSha256)
	set(f, "target_role", p.TargetRole)
	return nil
}

// set puts a member in as an entry body writes it.
func set(f map[string]json.RawMessage, name string, v any) {
	switch v := v.(type) {
	case string:
		f[name] = audit.String(v)
	case int32:
		f[name] = strconv.AppendInt(nil, int64(v), 10)
	case bool:
		f[name] = strconv.AppendBool(nil, v)
	}
}

// reencode writes fields back in the order of the members of body.
func reencode(body []byte, fields map[string]json.RawMessage) []byte {
	d := json.NewDecoder(bytes.NewReader(body))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return []byte("unreadable body")
	}
	var out bytes.Buffer
	out.WriteByte('{')
	for first := true; d.More(); first = false {
		t, err := d.Token()
		if err != nil {
			return []byte("unreadable body")
		}
		name, _ := t.(string)
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			return []byte("unreadable body")
		}
		if !first {
			out.WriteByte(',')
		}
		nb, _ := json.Marshal(name)
		out.Write(nb)
		out.WriteByte(':')
		out.Write(fields[name])
	}
	out.WriteByte('}')
	return out.Bytes()
}
