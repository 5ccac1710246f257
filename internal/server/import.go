package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/kxm"
	"github.com/contextd/contextd/internal/navi"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// ImportItems writes items given in one of the seeds' formats as one
// all-or-nothing batch (item.Service.ImportTx).
func (s *Server) ImportItems(ctx context.Context, r api.ImportItemsRequestObject) (api.ImportItemsResponseObject, error) {
	body, err := requireBody(r.Body)
	if err != nil {
		return nil, err
	}
	if len(body.Items) > item.MaxBatch {
		return nil, validation.One("/items", "too_many", "an import holds at most %d items, not %d", item.MaxBatch, len(body.Items))
	}
	var (
		ins    []item.Input
		retire []bool
	)
	switch body.Format {
	case api.ImportRequestFormatContextd:
		ins, err = contextdItems(body.Items)
	case api.ImportRequestFormatKxm:
		ins, retire, err = s.kxmItems(ctx, body.Items, r.Project)
	case api.ImportRequestFormatNavi:
		ins, err = naviItems(body.Items)
	default:
		return nil, validation.One("/format", "enum", "format must be contextd, kxm or navi, not %q", body.Format)
	}
	if err != nil {
		return nil, err
	}
	if retire == nil {
		retire = make([]bool, len(ins))
	}
	if deref(body.Proposal) {
		for i := range ins {
			ins[i].Propose = true
		}
	}
	var res item.BatchResult
	err = s.write(ctx, func(tx *store.Tx) error {
		res, err = s.items.ImportTx(ctx, tx, agentFrom(ctx), r.Project, ins, retire)
		return err
	})
	if err != nil {
		switch body.Format {
		case api.ImportRequestFormatNavi:
			err = remapPointers(err, naviPointer)
		case api.ImportRequestFormatKxm:
			err = remapPointers(err, kxm.Pointer)
		}
		return nil, err
	}
	return api.ImportItems200JSONResponse(toBatchResult(res)), nil
}

// contextdItems reads items in the batch's own shape, as strictly as a
// batch body (an unknown member is 400 at its pointer).
func contextdItems(raws []json.RawMessage) ([]item.Input, error) {
	var b bytes.Buffer
	b.WriteString(`{"items":[`)
	for i, raw := range raws {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(raw)
	}
	b.WriteString(`]}`)
	var body api.BatchRequest
	if err := decodeStrict(b.Bytes(), &body); err != nil {
		return nil, err
	}
	return batchInputs(body.Items)
}

// kxmItems reads KXM ContextItems (kxm.ParseItem) and checks them as the
// write will, every problem of every item at once, by pointers into the
// items as sent. An item that names itself in its sourceRef is an export
// of contextd coming back (kxmReimport).
func (s *Server) kxmItems(ctx context.Context, raws []json.RawMessage, project string) ([]item.Input, []bool, error) {
	var errs validation.List
	ins := make([]item.Input, len(raws))
	retire, failed := make([]bool, len(raws)), make([]bool, len(raws))
	var selfRefs []int
	for i, raw := range raws {
		before := errs.Len()
		k := kxm.ParseItem(raw, project, fmt.Sprintf("/items/%d", i), &errs)
		failed[i] = errs.Len() > before
		if failed[i] {
			continue
		}
		ins[i], retire[i] = kxmInput(k), k.Retire
		if k.SelfRef {
			selfRefs = append(selfRefs, i)
		}
	}
	if len(selfRefs) > 0 {
		// The exports coming back, against their current versions, read at once.
		keys := make([]string, len(selfRefs))
		for j, i := range selfRefs {
			keys[j] = ins[i].Key
		}
		cur, err := s.items.CurrentMany(ctx, agentFrom(ctx), project, keys)
		if err != nil {
			return nil, nil, err
		}
		for _, i := range selfRefs {
			if v := cur[ins[i].Key]; v != nil {
				propose := ins[i].Propose
				ins[i] = kxmReimport(raws[i], ins[i], v)
				ins[i].Propose = propose
			}
		}
	}
	fields := []validation.Field{}
	if err := errs.Err(); err != nil {
		fields = append(fields, err.(*validation.Error).Fields...)
	}
	var verr *validation.Error
	if err := item.Check(ins, failed); errors.As(err, &verr) {
		fields = append(fields, verr.Fields...)
	}
	if len(fields) > 0 {
		return nil, nil, remapPointers(&validation.Error{Fields: fields}, kxm.Pointer)
	}
	return ins, retire, nil
}

// kxmInput is the item write of a KXM item.
func kxmInput(k kxm.Imported) item.Input {
	in := item.Input{Key: k.Key, Kind: &k.Kind, Source: &k.Source, Content: k.Content, Authority: k.Authority,
		Confidence: k.Confidence, StateKey: k.StateKey, ValidFrom: k.ValidFrom, ValidUntil: k.ValidUntil, Metadata: k.Metadata}
	if k.SourceRef != "" || len(k.DerivedFrom) > 0 {
		in.Provenance = &ctxtype.Provenance{SourceRef: k.SourceRef, DerivedFrom: k.DerivedFrom}
	}
	in.Propose = k.Propose
	return in
}

// kxmReimport is the write of an item exported from contextd as a KXM
// ContextItem and imported again. An export says less than the item holds
// (KXM has no title, no roles, fewer kinds and sources), so: unchanged, the
// export is the current version as it is (nothing changes); changed, what
// KXM says replaces what it maps to, and the rest stays (the title, the
// roles, the trigger, the source reference, the metadata KXM has no member
// for). cur is the current version the caller may see.
func kxmReimport(raw json.RawMessage, in item.Input, cur *ctxtype.Version) item.Input {
	var sent, now map[string]any
	exported, _ := json.Marshal(kxm.Export(cur))
	if json.Unmarshal(raw, &sent) != nil || json.Unmarshal(exported, &now) != nil {
		return in
	}
	if sameExceptRef(sent, now) {
		return inputOf(cur)
	}
	// Each member KXM changed replaces what it maps to; a member it sent
	// back as exported keeps the current value (an instruction exported as
	// knowledge stays an instruction).
	keep := inputOf(cur)
	changed := func(member string) bool { return !reflect.DeepEqual(sent[member], now[member]) }
	sentProv, _ := sent["provenance"].(map[string]any)
	nowProv, _ := now["provenance"].(map[string]any)
	for member, set := range map[string]func(){
		"kind": func() { keep.Kind = in.Kind }, "summary": func() { keep.Content = in.Content },
		"authority": func() { keep.Authority = in.Authority }, "confidence": func() { keep.Confidence = in.Confidence },
		"stateKey": func() { keep.StateKey = in.StateKey }, "validFrom": func() { keep.ValidFrom = in.ValidFrom },
		"validUntil": func() { keep.ValidUntil = in.ValidUntil },
	} {
		if changed(member) {
			set()
		}
	}
	if !reflect.DeepEqual(sentProv["sourceType"], nowProv["sourceType"]) {
		keep.Source = in.Source
	}
	if !reflect.DeepEqual(sentProv["derivedFrom"], nowProv["derivedFrom"]) {
		keep.Provenance.DerivedFrom = []string{}
		if in.Provenance != nil {
			keep.Provenance.DerivedFrom = in.Provenance.DerivedFrom
		}
	}
	keep.Metadata = mergeKXM(cur.Metadata, in.Metadata)
	return keep
}

// sameExceptRef compares an item as sent with its export, the version in
// the sourceRef aside (an export of an older version is the same item).
func sameExceptRef(sent, now map[string]any) bool {
	strip := func(m map[string]any) []byte {
		c := maps.Clone(m)
		if p, ok := c["provenance"].(map[string]any); ok {
			p = maps.Clone(p)
			delete(p, "sourceRef")
			c["provenance"] = p
		}
		b, _ := json.Marshal(c)
		return b
	}
	return bytes.Equal(strip(sent), strip(now))
}

// mergeKXM is the current metadata with its kxm members replaced by those
// an import sent; every other member stays.
func mergeKXM(cur, sent json.RawMessage) json.RawMessage {
	var c, n map[string]json.RawMessage
	if json.Unmarshal(cur, &c) != nil || c == nil {
		c = map[string]json.RawMessage{}
	}
	_ = json.Unmarshal(sent, &n)
	var ck, nk map[string]json.RawMessage
	_ = json.Unmarshal(c["kxm"], &ck)
	_ = json.Unmarshal(n["kxm"], &nk)
	if ck == nil {
		ck = map[string]json.RawMessage{}
	}
	for _, k := range []string{"id", "project", "status", "observedAt", "supersedes", "evidenceRefs"} {
		delete(ck, k) // the members an export writes: what was sent says them now
	}
	maps.Copy(ck, nk)
	if len(ck) > 0 {
		b, _ := json.Marshal(ck)
		c["kxm"] = b
	} else {
		delete(c, "kxm")
	}
	b, _ := json.Marshal(c)
	return b
}

// inputOf is a version as the write that makes it again.
func inputOf(v *ctxtype.Version) item.Input {
	f := v.Fields
	prio := int32(f.Priority)
	in := item.Input{Key: v.Key, Kind: &f.Kind, Source: &f.Source, Title: &f.Title, Summary: &f.Summary, Content: f.Content,
		Priority: &prio, Authority: &f.Authority, Confidence: &f.Confidence, StateKey: &f.StateKey, Slot: &f.Slot,
		Trigger: &f.Trigger, Roles: &f.Roles, Template: &f.Template, Metadata: f.Metadata, Provenance: &f.Provenance}
	if f.ValidFrom != nil {
		t := f.ValidFrom.UTC().Format(time.RFC3339Nano)
		in.ValidFrom = &t
	}
	if f.ValidUntil != nil {
		t := f.ValidUntil.UTC().Format(time.RFC3339Nano)
		in.ValidUntil = &t
	}
	return in
}

// remapPointers points the problems of an import's item writes at the
// items as sent, in their format's members (kxm.Pointer, naviPointer);
// any other error passes.
func remapPointers(err error, remap func(string) string) error {
	var verr *validation.Error
	if !errors.As(err, &verr) {
		return err
	}
	out := &validation.Error{Fields: make([]validation.Field, len(verr.Fields))}
	for i, f := range verr.Fields {
		f.Pointer = remap(f.Pointer)
		out.Fields[i] = f
	}
	return out
}

// naviItems reads navi ContextPackets (navi.ToItem): always-on items of
// kind knowledge, navi's own metadata under metadata.navi.
func naviItems(raws []json.RawMessage) ([]item.Input, error) {
	var fields []validation.Field
	ins := make([]item.Input, len(raws))
	for i, raw := range raws {
		p, err := navi.ParseAt(fmt.Sprintf("/items/%d", i), raw)
		var verr *validation.Error
		if errors.As(err, &verr) {
			fields = append(fields, verr.Fields...)
			continue
		} else if err != nil {
			return nil, err
		}
		it := navi.ToItem(p)
		prio, trig := it.Priority, it.Trigger
		ins[i] = item.Input{Key: it.Key, Kind: &it.Kind, Source: &it.Source, Title: &it.Title, Content: it.Content,
			Priority: &prio, Trigger: &trig, Metadata: it.Metadata}
	}
	if len(fields) > 0 {
		return nil, &validation.Error{Fields: fields}
	}
	return ins, nil
}

// naviPointer is a problem's pointer into the packet as sent: navi's own
// metadata is kept under metadata.navi.metadata.
func naviPointer(ptr string) string {
	if m := itemsPrefix.FindStringSubmatch(ptr); m != nil && strings.HasPrefix(m[2], "/metadata/navi/metadata") {
		return m[1] + "/metadata" + strings.TrimPrefix(m[2], "/metadata/navi/metadata")
	}
	return ptr
}

var itemsPrefix = regexp.MustCompile(`^(/items/\d+)(/.*)?$`)
