package navi

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/validation"
)

func TestParseAccepts(t *testing.T) {
	t.Parallel()
	p, err := Parse([]byte(`{"source":"File","content":"x"}`))
	require.NoError(t, err)
	require.Equal(t, Packet{Source: Unit(File), Content: "x", Metadata: []byte(`{}`)}, p)

	p, err = Parse([]byte(` {"id":null,"title":"t","source":{"Other":"a\u00e9"},"content":"c","priority":-2147483648,"metadata":null,"extra":[1,{"\ud800":"\udc00"}]} `))
	require.NoError(t, err, "unknown members are ignored, their strings checked for syntax only")
	require.Nil(t, p.ID)
	require.Equal(t, "t", *p.Title)
	require.Equal(t, OtherSource("aé"), p.Source)
	require.Equal(t, int32(-2147483648), p.Priority)
	require.Equal(t, "null", string(p.Metadata))

	for _, ok := range []string{
		`{"source":{"File":null},"content":""}`,
		`{"source":"Fil\u0065","content":"x","priority":-0}`,
		`{"s\u006furce":"Project","content":"x"}`,
		`["i","File",null,"c"]`,
		`[null,"File",null,"c",7,{"a":1e308}]`,
		`{"source":"File","content":"x","metadata":{"a":1e-400,"b":123456789012345678901234567890,"a":2}}`,
		`{"source":"File","content":"\ud83d\udc4d\u0000"}`,
		`{"source":"File","content":"x","unknown":"` + "\xff" + `"}`,
	} {
		_, err := Parse([]byte(ok))
		require.NoError(t, err, ok)
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]validation.Field{
		`{"source":"Nope","content":"x"}`:                          {Pointer: "/source", Code: CodeEnum},
		`{"source":{"Nope":null},"content":"x"}`:                   {Pointer: "/source", Code: CodeEnum},
		`{"source":"Other","content":"x"}`:                         {Pointer: "/source", Code: CodeType},
		`{"source":{"Other":null},"content":"x"}`:                  {Pointer: "/source", Code: CodeType},
		`{"source":{"File":1},"content":"x"}`:                      {Pointer: "/source", Code: CodeType},
		`{"source":{"File":null,"Project":null},"content":"x"}`:    {Pointer: "/source", Code: CodeType},
		`{"source":{},"content":"x"}`:                              {Pointer: "/source", Code: CodeType},
		`{"source":"file","content":"x"}`:                          {Pointer: "/source", Code: CodeEnum},
		`{"source":null,"content":"x"}`:                            {Pointer: "/source", Code: CodeType},
		`{"source":"File","content":"x","priority":2147483648}`:    {Pointer: "/priority", Code: CodeRange},
		`{"source":"File","content":"x","priority":-2147483649}`:   {Pointer: "/priority", Code: CodeRange},
		`{"source":"File","content":"x","priority":1.0}`:           {Pointer: "/priority", Code: CodeType},
		`{"source":"File","content":"x","priority":1e2}`:           {Pointer: "/priority", Code: CodeType},
		`{"source":"File","content":"x","priority":null}`:          {Pointer: "/priority", Code: CodeType},
		`{"source":"File","content":"x","priority":"1"}`:           {Pointer: "/priority", Code: CodeType},
		`{"source":"File","content":null}`:                         {Pointer: "/content", Code: CodeType},
		`{"source":"File"}`:                                        {Pointer: "/content", Code: CodeRequired},
		`{"content":"x"}`:                                          {Pointer: "/source", Code: CodeRequired},
		`{"source":"File","content":"x","id":1}`:                   {Pointer: "/id", Code: CodeType},
		`{"source":"File","content":"x","title":false}`:            {Pointer: "/title", Code: CodeType},
		`{"source":"File","content":"x","content":"y"}`:            {Pointer: "/content", Code: CodeDuplicate},
		`{"source":"File","content":"\ud800"}`:                     {Pointer: "/content", Code: CodeFormat},
		`{"source":"File","content":"\udc00x"}`:                    {Pointer: "/content", Code: CodeFormat},
		"{\"source\":\"File\",\"content\":\"\xff\"}":               {Pointer: "/content", Code: CodeFormat},
		`{"source":"File","content":"x","metadata":{"a":[1e400]}}`: {Pointer: "/metadata/a/0", Code: CodeRange},
		`{"source":"File","content":"x","metadata":{"\ud800":1}}`:  {Pointer: "/metadata", Code: CodeFormat},
		`{"\ud800":1,"source":"File","content":"x"}`:               {Pointer: "", Code: CodeFormat},
		`{"source":"File","content":"x",}`:                         {Pointer: "", Code: CodeSyntax},
		`{"source":"File","content":"x"} x`:                        {Pointer: "", Code: CodeSyntax},
		`{"source":"File","content":"x","z":01}`:                   {Pointer: "/z", Code: CodeSyntax},
		`{"source":"File","content":"x","z":"\x"}`:                 {Pointer: "/z", Code: CodeSyntax},
		"{\"source\":\"File\",\"content\":\"a\tb\"}":               {Pointer: "/content", Code: CodeSyntax},
		`["i","File",null]`:                                        {Pointer: "/3", Code: CodeRequired},
		`[]`:                                                       {Pointer: "/1", Code: CodeRequired},
		`[null,"File",null,"c",0,{},7]`:                            {Pointer: "/6", Code: CodeType},
		`"File"`:                                                   {Pointer: "", Code: CodeType},
		``:                                                         {Pointer: "", Code: CodeSyntax},
	} {
		_, err := Parse([]byte(in))
		var verr *validation.Error
		require.True(t, errors.As(err, &verr), "%s: %v", in, err)
		require.Equal(t, want.Pointer, verr.Fields[0].Pointer, in)
		require.Equal(t, want.Code, verr.Fields[0].Code, in)
	}
}

// TestParseDepth: serde_json reads 127 nested containers and refuses the
// 128th; the packet object is the first, ignored members do not count.
func TestParseDepth(t *testing.T) {
	t.Parallel()
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	_, err := Parse([]byte(`{"source":"File","content":"x","metadata":` + nest(126) + `}`))
	require.NoError(t, err)
	_, err = Parse([]byte(`{"source":"File","content":"x","metadata":` + nest(127) + `}`))
	require.ErrorContains(t, err, "recursion limit")
	_, err = Parse([]byte(`{"source":"File","content":"x","ignored":` + nest(1000) + `}`))
	require.NoError(t, err)
	_, err = ParseList([]byte(`[{"source":"File","content":"x","metadata":` + nest(125) + `}]`))
	require.NoError(t, err)
	_, err = ParseList([]byte(`[{"source":"File","content":"x","metadata":` + nest(126) + `}]`))
	require.ErrorContains(t, err, "recursion limit")
}

func TestParseListCollects(t *testing.T) {
	t.Parallel()
	_, err := ParseListAt("/context_packets", []byte(`[{"source":"File","content":"x"},{"source":"Bad","content":1},{"content":"y","priority":9999999999}]`))
	var verr *validation.Error
	require.ErrorAs(t, err, &verr)
	var got []string
	for _, f := range verr.Fields {
		got = append(got, f.Pointer+" "+f.Code)
	}
	require.Equal(t, []string{"/context_packets/1/source enum", "/context_packets/1/content type",
		"/context_packets/2/priority range", "/context_packets/2/source required"}, got)
	require.Contains(t, verr.Fields[0].Detail, "unknown variant `Bad`")
}

func TestMarshalRoundTrip(t *testing.T) {
	t.Parallel()
	id := "k"
	in := Packet{ID: &id, Source: OtherSource("a\"<b>"), Content: "c\n", Priority: -3, Metadata: []byte(`{ "x" : [1, 2] }`)}
	raw, err := in.MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, `{"id":"k","source":{"Other":"a\"<b>"},"title":null,"content":"c\n","priority":-3,"metadata":{"x":[1,2]}}`, string(raw))
	back, err := Parse(raw)
	require.NoError(t, err)
	in.Metadata = []byte(`{"x":[1,2]}`)
	require.Equal(t, in, back)
}
