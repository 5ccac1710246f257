package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/kxm"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

func etag(v int) *string {
	s := `"` + strconv.Itoa(v) + `"`
	return &s
}

// parseIfMatch reads If-Match: "*" or a list of entity tags ("3", "4").
// ETags are strong ("<version>"); a weak one (W/"3") never matches, as
// RFC 9110 wants for If-Match.
func parseIfMatch(h *string) (*item.Precondition, error) {
	if h == nil {
		return nil, nil
	}
	p := &item.Precondition{}
	for _, tag := range strings.Split(*h, ",") {
		tag = strings.TrimSpace(tag)
		switch {
		case tag == "*":
			p.Any = true
			continue
		case strings.HasPrefix(tag, "W/"):
			tag = strings.TrimPrefix(tag, "W/") // well formed, but never matches
			if _, ok := etagVersion(tag); !ok {
				return nil, validation.One("If-Match", "format", `If-Match must be "*" or entity tags like "3", as given in ETag`)
			}
			continue
		}
		v, ok := etagVersion(tag)
		if !ok {
			return nil, validation.One("If-Match", "format", `If-Match must be "*" or entity tags like "3", as given in ETag`)
		}
		p.Versions = append(p.Versions, v)
	}
	return p, nil
}

// noneMatchHolds reports whether If-None-Match h names version: "*", or
// one of its entity tags, compared weakly as RFC 9110 wants for
// If-None-Match (W/"3" names version 3 too). A client's cached copy is then
// current, and a GET answers 304. A tag of another form names nothing: a
// cache validator a client kept from elsewhere only costs a full answer.
func noneMatchHolds(h string, version int) bool {
	want := *etag(version)
	for _, tag := range strings.Split(h, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == "*" || tag == want { // tags compare as strings: "01" is not "1"
			return true
		}
	}
	return false
}

func etagVersion(tag string) (int, bool) {
	if len(tag) < 3 || tag[0] != '"' || tag[len(tag)-1] != '"' {
		return 0, false
	}
	n, err := strconv.Atoi(tag[1 : len(tag)-1])
	return n, err == nil && n >= 1
}

func pageLimit(l *int64) (int, error) {
	if l == nil {
		return 100, nil
	}
	if *l < 1 || *l > 1000 {
		return 0, validation.One("limit", "range", "limit must be between 1 and 1000, not %d", *l)
	}
	return int(*l), nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func toInput(key string, w api.ItemWrite) item.Input {
	in := item.Input{
		Key: key, Kind: w.Kind, Source: w.Source, Title: w.Title, Summary: w.Summary, Content: w.Content,
		Priority: w.Priority, Authority: w.Authority, Confidence: w.Confidence, StateKey: w.StateKey,
		ValidFrom: w.ValidFrom, ValidUntil: w.ValidUntil, Slot: w.Slot, Template: w.Template, Propose: deref(w.Proposal),
	}
	if w.Metadata != nil {
		in.Metadata = *w.Metadata
	}
	if t := w.Trigger; t != nil {
		in.Trigger = &ctxtype.Trigger{Always: deref(t.Always), PinnedOnly: deref(t.PinnedOnly), Relevance: deref(t.Relevance), Tool: t.Tool}
		if t.Keywords != nil {
			in.Trigger.Keywords = append([]string{}, *t.Keywords...)
		}
		if t.Match != nil {
			in.Trigger.Match = string(*t.Match)
		}
	}
	if r := w.Roles; r != nil {
		in.Roles = &ctxtype.Roles{VisibleTo: deref(r.VisibleTo), HiddenFrom: deref(r.HiddenFrom)}
	}
	if p := w.Provenance; p != nil {
		in.Provenance = &ctxtype.Provenance{SourceRef: deref(p.SourceRef), DerivedFrom: deref(p.DerivedFrom)}
	}
	return in
}

func ptrIf[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

func toItem(v *ctxtype.Version) api.Item {
	t := v.Trigger
	trig := api.Trigger{Tool: t.Tool}
	if t.Always {
		trig.Always = &t.Always
	}
	if t.PinnedOnly {
		trig.PinnedOnly = &t.PinnedOnly
	}
	if t.Relevance {
		trig.Relevance = &t.Relevance
	}
	if t.Keywords != nil {
		kw := t.Keywords
		trig.Keywords = &kw
	}
	if t.Match != "" {
		m := api.TriggerMatch(t.Match)
		trig.Match = &m
	}
	vis, hid, der := v.Roles.VisibleTo, v.Roles.HiddenFrom, v.Provenance.DerivedFrom
	return api.Item{
		Project: v.Project, Key: v.Key, Version: int32(v.Version), Deleted: v.Deleted,
		Kind: v.Kind, Source: v.Source, Title: v.Title, Summary: v.Summary, Content: v.Content,
		Priority: int32(v.Priority), Authority: v.Authority, Confidence: v.Confidence, StateKey: v.StateKey,
		ValidFrom: v.ValidFrom, ValidUntil: v.ValidUntil, Slot: v.Slot, Trigger: trig,
		Roles:    api.Roles{VisibleTo: &vis, HiddenFrom: &hid},
		Template: v.Template, Metadata: v.Metadata,
		Provenance:    api.Provenance{SourceRef: ptrIf(v.Provenance.SourceRef), DerivedFrom: &der},
		ContentSha256: v.ContentSHA256, Tokens: int32(v.Tokens.O200k), TokensCl100kBase: int32(v.Tokens.Cl100k),
		CreatedAt: v.CreatedAt, CreatedBy: v.CreatedBy, XactId: v.XactID,
	}
}

func toItems(vs []*ctxtype.Version) []api.Item {
	out := make([]api.Item, len(vs))
	for i, v := range vs {
		out[i] = toItem(v)
	}
	return out
}

// metadataShape reports metadata values that are not JSON objects: the
// contract types metadata as an object, but it is decoded raw (to keep its
// numbers exact), so the decoder cannot say so itself.
func metadataShape(raws map[string]*json.RawMessage) error {
	var fields []validation.Field
	for ptr, raw := range raws {
		if raw == nil {
			continue
		}
		b := bytes.TrimSpace(*raw)
		if len(b) > 0 && b[0] != '{' && !bytes.Equal(b, []byte("null")) {
			fields = append(fields, validation.Field{Pointer: ptr, Code: "type", Detail: ptr + " must be a JSON object"})
		}
	}
	if len(fields) == 0 {
		return nil
	}
	sort.Slice(fields, func(i, j int) bool { return fields[i].Pointer < fields[j].Pointer })
	return &Problem{Status: 400, Code: "malformed", Detail: "metadata must be a JSON object", Fields: fields}
}

// PutItem implements api.StrictServerInterface.
func (s *Server) PutItem(ctx context.Context, r api.PutItemRequestObject) (api.PutItemResponseObject, error) {
	body, err := requireBody(r.Body)
	if err != nil {
		return nil, err
	}
	if err := metadataShape(map[string]*json.RawMessage{"/metadata": body.Metadata}); err != nil {
		return nil, err
	}
	ifMatch, err := parseIfMatch(r.Params.IfMatch)
	if err != nil {
		return nil, err
	}
	var res item.PutResult
	in, opts := toInput(r.Key, *body), item.PutOpts{IfMatch: ifMatch}
	if inUnit(ctx) {
		err = s.write(ctx, func(tx *store.Tx) error {
			res, err = s.items.PutTx(ctx, tx, agentFrom(ctx), r.Project, in, opts)
			return err
		})
	} else {
		// Not s.write: a write of its own shares its transaction with the
		// project's concurrent writes (item.Service.Put).
		res, err = s.items.Put(ctx, agentFrom(ctx), r.Project, in, opts)
	}
	if err != nil {
		return nil, err
	}
	if res.Proposal != nil {
		return api.PutItem202JSONResponse(toProposal(*res.Proposal, nil)), nil
	}
	h := etag(res.Version.Version)
	if res.Status == item.Unchanged {
		return api.PutItem200JSONResponse{Body: toItem(res.Version), Headers: api.PutItem200ResponseHeaders{ETag: h}}, nil
	}
	return api.PutItem201JSONResponse{Body: toItem(res.Version), Headers: api.PutItem201ResponseHeaders{ETag: h}}, nil
}

// GetItem implements api.StrictServerInterface.
func (s *Server) GetItem(ctx context.Context, r api.GetItemRequestObject) (api.GetItemResponseObject, error) {
	var asOf *time.Time
	if r.Params.AsOf != nil {
		t, err := time.Parse(time.RFC3339Nano, *r.Params.AsOf)
		if err != nil {
			return nil, validation.One("as_of", "format", "as_of must be an RFC 3339 time, not %q", *r.Params.AsOf)
		}
		asOf = &t
	}
	format := api.GetItemParamsFormatContextd
	if r.Params.Format != nil {
		format = *r.Params.Format
	}
	if !format.Valid() {
		return nil, validation.One("format", "enum", "format must be contextd or kxm, not %q", format)
	}
	view, err := s.items.GetView(ctx, agentFrom(ctx), r.Project, r.Key, asOf)
	if err != nil {
		return nil, err
	}
	v := view.Version
	if r.Params.IfNoneMatch != nil && noneMatchHolds(*r.Params.IfNoneMatch, v.Version) {
		return api.GetItem304Response{Headers: api.GetItem304ResponseHeaders{ETag: etag(v.Version)}}, nil
	}
	var body any = toItemView(view, asOf == nil)
	if format == api.GetItemParamsFormatKxm {
		body = kxm.Export(v)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return itemAnswer{body: b, etag: *etag(v.Version)}, nil
}

// itemAnswer is GetItem's 200 answer (api.GetItem200JSONResponse) with
// its body written as encoded. The body is already compact JSON, the item
// in the asked format, which the generated response, taking it as a
// json.RawMessage, would scan and compact a second time: a tenth of a GET's
// CPU. The bytes on the wire are the same: json.Marshal escapes as the
// generated encoder does, and its encoder ends the body with a newline.
type itemAnswer struct {
	body []byte
	etag string
}

func (a itemAnswer) VisitGetItemResponse(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("ETag", a.etag)
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(append(a.body, '\n'))
	return err
}

// DeleteItem implements api.StrictServerInterface.
func (s *Server) DeleteItem(ctx context.Context, r api.DeleteItemRequestObject) (api.DeleteItemResponseObject, error) {
	ifMatch, err := parseIfMatch(r.Params.IfMatch)
	if err != nil {
		return nil, err
	}
	var v *ctxtype.Version
	err = s.write(ctx, func(tx *store.Tx) error {
		var err error
		v, err = s.items.DeleteTx(ctx, tx, agentFrom(ctx), r.Project, r.Key, item.PutOpts{IfMatch: ifMatch})
		return err
	})
	if err != nil {
		return nil, err
	}
	return api.DeleteItem200JSONResponse{Body: toItem(v), Headers: api.DeleteItem200ResponseHeaders{ETag: etag(v.Version)}}, nil
}

// ListItemVersions implements api.StrictServerInterface.
func (s *Server) ListItemVersions(ctx context.Context, r api.ListItemVersionsRequestObject) (api.ListItemVersionsResponseObject, error) {
	limit, err := pageLimit(r.Params.Limit)
	if err != nil {
		return nil, err
	}
	views, next, err := s.items.VersionsView(ctx, agentFrom(ctx), r.Project, r.Key, deref(r.Params.Cursor), limit)
	if err != nil {
		return nil, err
	}
	out := make([]api.Item, len(views))
	for i, v := range views {
		out[i] = toItemView(v, false)
	}
	return api.ListItemVersions200JSONResponse{Data: out, NextCursor: ptrIf(next)}, nil
}

// GetItemVersion implements api.StrictServerInterface.
func (s *Server) GetItemVersion(ctx context.Context, r api.GetItemVersionRequestObject) (api.GetItemVersionResponseObject, error) {
	v, err := s.items.VersionView(ctx, agentFrom(ctx), r.Project, r.Key, int(r.Version))
	if err != nil {
		return nil, err
	}
	return api.GetItemVersion200JSONResponse{Body: toItemView(v, false), Headers: api.GetItemVersion200ResponseHeaders{ETag: etag(v.Version.Version)}}, nil
}

// ListItems implements api.StrictServerInterface.
func (s *Server) ListItems(ctx context.Context, r api.ListItemsRequestObject) (api.ListItemsResponseObject, error) {
	limit, err := pageLimit(r.Params.Limit)
	if err != nil {
		return nil, err
	}
	p, err := s.items.List(ctx, agentFrom(ctx), r.Project, item.ListParams{
		Kind: deref(r.Params.Kind), Source: deref(r.Params.Source), Query: deref(r.Params.Q),
		Cursor: deref(r.Params.Cursor), Limit: limit,
	})
	if err != nil {
		return nil, err
	}
	return api.ListItems200JSONResponse{Data: toItems(p.Versions), NextCursor: ptrIf(p.Next)}, nil
}

// BatchItems implements api.StrictServerInterface.
func (s *Server) BatchItems(ctx context.Context, r api.BatchItemsRequestObject) (api.BatchItemsResponseObject, error) {
	body, err := requireBody(r.Body)
	if err != nil {
		return nil, err
	}
	ins, err := batchInputs(body.Items)
	if err != nil {
		return nil, err
	}
	var res item.BatchResult
	err = s.write(ctx, func(tx *store.Tx) error {
		res, err = s.items.BatchTx(ctx, tx, agentFrom(ctx), r.Project, ins)
		return err
	})
	if err != nil {
		return nil, err
	}
	return api.BatchItems200JSONResponse(toBatchResult(res)), nil
}

// batchInputs is a batch's items as item writes, after the metadata's shape.
func batchInputs(items []api.BatchItem) ([]item.Input, error) {
	skip := make([]bool, len(items))
	if p := metadataProblems(items, skip); p != nil {
		// Every problem of every item at once: the other items' values too.
		p.Fields = append(p.Fields, checkBatchValues(items, skip)...)
		return nil, p
	}
	ins := make([]item.Input, len(items))
	for i, b := range items {
		ins[i] = batchInput(b)
	}
	return ins, nil
}

// batchInput is one batch item as an item write.
func batchInput(b api.BatchItem) item.Input {
	return toInput(b.Key, api.ItemWrite{
		Kind: b.Kind, Source: b.Source, Title: b.Title, Summary: b.Summary, Content: b.Content,
		Priority: b.Priority, Authority: b.Authority, Confidence: b.Confidence, StateKey: b.StateKey,
		ValidFrom: b.ValidFrom, ValidUntil: b.ValidUntil, Slot: b.Slot, Trigger: b.Trigger, Roles: b.Roles,
		Template: b.Template, Metadata: b.Metadata, Provenance: b.Provenance, Proposal: b.Proposal,
	})
}

func toBatchResult(res item.BatchResult) api.BatchResult {
	out := api.BatchResult{Created: res.Created, Updated: res.Updated, Unchanged: res.Unchanged, Proposed: res.Proposed}
	out.Items = make([]struct {
		Key        string `json:"key"`
		Proposal   *int32 `json:"proposal,omitempty"`
		Status     string `json:"status"`
		Tombstoned *bool  `json:"tombstoned,omitempty"`
		Version    int32  `json:"version"`
	}, len(res.Items))
	for i, e := range res.Items {
		out.Items[i].Key, out.Items[i].Status, out.Items[i].Version = e.Key, string(e.Status), int32(e.Version)
		if e.Tombstoned {
			out.Items[i].Tombstoned = &e.Tombstoned
		}
		if e.Proposal > 0 {
			n := int32(e.Proposal)
			out.Items[i].Proposal = &n
		}
	}
	return out
}
