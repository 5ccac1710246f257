package limits

import (
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/validation"
)

func TestWith(t *testing.T) {
	l, err := Default.With(map[string]string{"query": "8000", "content": " 2097152 "})
	if err != nil {
		t.Fatal(err)
	}
	if l.Query != 8000 || l.Content != 2<<20 || l.Role != Default.Role {
		t.Fatalf("With changed the wrong limits: %+v", l)
	}
	if Default.Query != 4000 {
		t.Fatal("With changed Default")
	}
	for _, bad := range []map[string]string{{"query": "0"}, {"query": "many"}, {"nonsense": "1"}} {
		if _, err := Default.With(bad); err == nil {
			t.Fatalf("With(%v) accepted", bad)
		}
	}
	if _, err := Default.With(map[string]string{"nonsense": "1"}); err == nil || !strings.Contains(err.Error(), "agent_context") {
		t.Fatalf("the error lists the known names: %v", err)
	}
	if len(Names()) != 23 {
		t.Fatalf("every field has a name: %v", Names())
	}
}

func TestCharsCountsCharacters(t *testing.T) {
	var errs validation.List
	Chars(&errs, "/a", strings.Repeat("é", 10), 10) // 20 bytes, 10 characters
	Chars(&errs, "/b", strings.Repeat("é", 11), 10)
	Bytes(&errs, "/c", 11, 10)
	Items(&errs, "/d", 3, 2)
	err, ok := errs.Err().(*validation.Error)
	if !ok || len(err.Fields) != 3 || err.Fields[0].Pointer != "/b" || err.Fields[1].Code != "too_long" || err.Fields[2].Code != "too_many" {
		t.Fatalf("got %v", errs.Err())
	}
}
