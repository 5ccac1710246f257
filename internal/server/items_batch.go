package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/validation"
)

// batchValueProblems are the value problems (a bad key, blank content, an
// unknown kind, a metadata that is no object, ...) of the items of a batch
// whose shape is wrong, those of its items that are in the contract's
// shape: a batch's answer names every problem of every item at once,
// whichever kind it is. shape are the shape problems; one outside the items
// leaves nothing more to say.
func batchValueProblems(body []byte, shape []validation.Field) []validation.Field {
	var raw struct {
		Items []json.RawMessage `json:"items"`
	}
	if json.Unmarshal(body, &raw) != nil || len(raw.Items) == 0 || len(raw.Items) > item.MaxBatch {
		return nil
	}
	skip := make([]bool, len(raw.Items))
	for _, f := range shape {
		n := itemIndex(f.Pointer)
		if n < 0 || n >= len(skip) {
			return nil
		}
		skip[n] = true
	}
	items := make([]api.BatchItem, len(raw.Items))
	for n, r := range raw.Items {
		if !skip[n] && json.Unmarshal(r, &items[n]) != nil {
			skip[n] = true
		}
	}
	var out []validation.Field
	if p := metadataProblems(items, skip); p != nil {
		out = p.Fields
	}
	return append(out, checkBatchValues(items, skip)...)
}

// metadataProblems is the problem of the metadata that are no object among
// the items not skipped (metadataShape), nil if none; it marks those items
// skipped, for checkBatchValues.
func metadataProblems(items []api.BatchItem, skip []bool) *Problem {
	metas := map[string]*json.RawMessage{}
	for n := range items {
		if !skip[n] {
			metas[fmt.Sprintf("/items/%d/metadata", n)] = items[n].Metadata
		}
	}
	var p *Problem
	if !errors.As(metadataShape(metas), &p) {
		return nil
	}
	for _, f := range p.Fields {
		skip[itemIndex(f.Pointer)] = true
	}
	return p
}

// checkBatchValues are the value problems of a batch's items but those
// skipped (item.Check).
func checkBatchValues(items []api.BatchItem, skip []bool) []validation.Field {
	ins := make([]item.Input, len(items))
	for n, b := range items {
		if !skip[n] {
			ins[n] = batchInput(b)
		}
	}
	var verr *validation.Error
	if err := item.Check(ins, skip); errors.As(err, &verr) {
		return verr.Fields
	}
	return nil
}

// itemIndex is the item a pointer into a batch names ("/items/3/key": 3),
// or -1.
func itemIndex(pointer string) int {
	rest, ok := strings.CutPrefix(pointer, "/items/")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(strings.SplitN(rest, "/", 2)[0])
	if err != nil || n < 0 {
		return -1
	}
	return n
}
