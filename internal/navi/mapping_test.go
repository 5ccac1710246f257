package navi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
)

func TestSources(t *testing.T) {
	t.Parallel()
	for v, src := range unitVariants {
		got, exact := Unit(v).ItemSource()
		require.True(t, exact)
		require.Equal(t, src, got)
		require.Equal(t, Unit(v), FromItemSource(src))
	}
	for tag, want := range map[string]string{
		"custom-tag":            "other:custom-tag",
		"a b/c\"é":              "other:a_b_c__",
		"":                      "other:_",
		strings.Repeat("x", 70): "other:" + strings.Repeat("x", 64),
		strings.Repeat("x", 64): "other:" + strings.Repeat("x", 64),
		"File":                  "other:File",
	} {
		got, exact := OtherSource(tag).ItemSource()
		require.Equal(t, want, got, tag)
		require.Equal(t, got == "other:"+tag, exact)
	}
	require.Equal(t, `Other("custom-tag")`, DebugSource("other:custom-tag"))
	require.Equal(t, "CanvasNode", DebugSource("canvas_node"))
	for _, s := range []string{"rag", "memory", "steering", "human", "git", "workflow", "tool", "peer", "external", "derived"} {
		require.Equal(t, `Other("`+s+`")`, DebugSource(s))
	}
}

func TestKey(t *testing.T) {
	t.Parallel()
	id := func(s string) *string { return &s }
	require.Equal(t, "notes.md:3", Key(Packet{ID: id("notes.md:3")}))
	a, b := Key(Packet{ID: id("a b")}), Key(Packet{ID: id("a/b")})
	require.NotEqual(t, a, b, "two ids never share a key")
	require.True(t, strings.HasPrefix(a, "a_b_"))
	for _, k := range []string{a, b, Key(Packet{ID: id("")}), Key(Packet{ID: id(strings.Repeat("é", 300))}), Key(Packet{Content: "x"})} {
		require.True(t, ctxtype.ValidKey(k), k)
	}
	p := Packet{Source: Unit(File), Title: id("t"), Content: "c"}
	require.Equal(t, Key(p), Key(p), "deterministic")
	require.True(t, strings.HasPrefix(Key(p), "navi:"))
	q := p
	q.Title = nil
	require.NotEqual(t, Key(p), Key(q), "no title differs from a title")
	q.Title = id("")
	require.NotEqual(t, Key(p), Key(q))
	q = p
	q.Priority = 9
	require.Equal(t, Key(p), Key(q), "the priority is not part of the derived key")
}

func TestToItemAndBack(t *testing.T) {
	t.Parallel()
	packets, err := ParseList([]byte(`[
		{"id":"a b","source":{"Other":"my tag"},"title":"","content":"x","priority":4,"metadata":{"k":[1]}},
		{"source":"CanvasNode","content":"y"},
		{"id":"plain","source":"Decision","title":"T","content":"z","metadata":null}]`))
	require.NoError(t, err)
	it := ToItem(packets[0])
	require.Equal(t, Item{Key: Key(packets[0]), Kind: "knowledge", Source: "other:my_tag", Title: "", Content: "x", Priority: 4,
		Trigger: ctxtype.Trigger{Always: true}, Metadata: it.Metadata}, it)
	require.JSONEq(t, `{"navi":{"id":"a b","title":"","source":{"Other":"my tag"},"metadata":{"k":[1]}}}`, string(it.Metadata))
	for _, p := range packets {
		it := ToItem(p)
		require.True(t, json.Valid(it.Metadata))
		back := FromItem(it.Key, it.Source, it.Title, it.Content, int(it.Priority), it.Metadata)
		require.Equal(t, p, back)
	}
	native := FromItem("k1", "rag", "", "c", 1<<40, json.RawMessage(`{"m":1}`))
	require.Equal(t, "k1", *native.ID)
	require.Equal(t, OtherSource("rag"), native.Source)
	require.Nil(t, native.Title)
	require.Equal(t, int32(1<<31-1), native.Priority)
	require.Equal(t, `{"m":1}`, string(native.Metadata))
}
