package server

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
)

// GetItem's own answer writes the bytes and headers the generated one
// would, for bodies with what JSON encoders escape or reformat.
func TestItemAnswerIsTheGeneratedAnswer(t *testing.T) {
	for _, v := range []any{
		map[string]any{"key": "k", "content": "<b>a & b</b>\u2028\u2029 \"quoted\" \\ é 😀", "n": 1.5},
		map[string]any{"metadata": json.RawMessage(`{"a": [1, 2,  3], "b": "</script>"}`)},
		[]any{},
	} {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		ours, theirs := httptest.NewRecorder(), httptest.NewRecorder()
		require.NoError(t, itemAnswer{body: b, etag: *etag(7)}.VisitGetItemResponse(ours))
		require.NoError(t, api.GetItem200JSONResponse{Body: b, Headers: api.GetItem200ResponseHeaders{ETag: etag(7)}}.VisitGetItemResponse(theirs))
		require.Equal(t, theirs.Code, ours.Code)
		require.Equal(t, theirs.Header(), ours.Header())
		require.Equal(t, theirs.Body.String(), ours.Body.String())
	}
}
