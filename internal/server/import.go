package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/contextd/contextd/api"
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
		ins, retire, err = kxmItems(body.Items, r.Project)
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
	var res item.BatchResult
	err = s.write(ctx, func(tx *store.Tx) error {
		res, err = s.items.ImportTx(ctx, tx, agentFrom(ctx), r.Project, ins, retire)
		return err
	})
	if err != nil {
		if body.Format == api.ImportRequestFormatNavi {
			err = naviPointers(err)
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

// kxmItems reads KXM ContextItems (kxm.ParseItem), every problem at once.
func kxmItems(raws []json.RawMessage, project string) ([]item.Input, []bool, error) {
	var errs validation.List
	ins := make([]item.Input, len(raws))
	retire := make([]bool, len(raws))
	for i, raw := range raws {
		k := kxm.ParseItem(raw, project, fmt.Sprintf("/items/%d", i), &errs)
		in := item.Input{Key: k.Key, Kind: &k.Kind, Source: &k.Source, Content: k.Content, Authority: k.Authority,
			Confidence: k.Confidence, StateKey: k.StateKey, ValidFrom: k.ValidFrom, ValidUntil: k.ValidUntil, Metadata: k.Metadata}
		if k.SourceRef != "" || len(k.DerivedFrom) > 0 {
			in.Provenance = &item.Provenance{SourceRef: k.SourceRef, DerivedFrom: k.DerivedFrom}
		}
		if k.PinnedOnly {
			in.Trigger = &item.Trigger{PinnedOnly: true}
		}
		ins[i], retire[i] = in, k.Retire
	}
	if err := errs.Err(); err != nil {
		return nil, nil, err
	}
	return ins, retire, nil
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

// naviPointers points the item write's problems of a navi import at the
// packet as sent: navi's own metadata is kept under metadata.navi.metadata.
func naviPointers(err error) error {
	var verr *validation.Error
	if !errors.As(err, &verr) {
		return err
	}
	out := &validation.Error{Fields: make([]validation.Field, len(verr.Fields))}
	for i, f := range verr.Fields {
		if m := itemsPrefix.FindStringSubmatch(f.Pointer); m != nil && strings.HasPrefix(m[2], "/metadata/navi/metadata") {
			f.Pointer = m[1] + "/metadata" + strings.TrimPrefix(m[2], "/metadata/navi/metadata")
		}
		out.Fields[i] = f
	}
	return out
}

var itemsPrefix = regexp.MustCompile(`^(/items/\d+)(/.*)?$`)
