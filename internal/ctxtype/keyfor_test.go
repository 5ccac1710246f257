package ctxtype

import "testing"

func TestKeyFor(t *testing.T) {
	if got := KeyFor("ctx-1.a:b_c"); got != "ctx-1.a:b_c" {
		t.Fatalf("a valid key must stay itself, got %q", got)
	}
	a, b := KeyFor("notes/a b"), KeyFor("notes a/b")
	if a == b {
		t.Fatalf("ids differing in mapped characters must not collide: both %q", a)
	}
	for _, id := range []string{"notes/a b", "ünïcode", string(make([]byte, 500)) + "x", "a/" + string(rune(0x1F600))} {
		k := KeyFor(id)
		if !ValidKey(k) {
			t.Fatalf("KeyFor(%q) = %q is not a valid key", id, k)
		}
		if KeyFor(id) != k {
			t.Fatalf("KeyFor is not deterministic for %q", id)
		}
	}
	if KeyFor("") != "" {
		t.Fatal("an empty id has no key")
	}
}
