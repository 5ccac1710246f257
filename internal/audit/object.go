package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
	"unsafe"
)

// object writes an entry body: a JSON object whose members are in the
// order written, without white space, strings as CanonicalJSON writes
// them, times as RFC 3339 UTC with six fractional digits (Time), binary
// values as lowercase hex and JSON values in CanonicalJSON. The first
// member is always "entry", the entry's kind.
type object struct {
	b   bytes.Buffer
	err error
}

func newObject(kind string) *object {
	return (&object{}).reset(kind)
}

// reset starts o again as a new object of the kind, keeping its buffer:
// RecordsDigest writes a packet's ~80 records through one.
func (o *object) reset(kind string) *object {
	o.b.Reset()
	o.err = nil
	o.b.WriteString(`{"entry":`)
	canonicalString(&o.b, kind)
	return o
}

func (o *object) name(n string) *object {
	o.b.WriteByte(',')
	canonicalString(&o.b, n)
	o.b.WriteByte(':')
	return o
}

func (o *object) str(n, v string) *object {
	canonicalString(&o.name(n).b, v)
	return o
}

func (o *object) optStr(n string, v *string) *object {
	if v == nil {
		o.name(n).b.WriteString("null")
		return o
	}
	return o.str(n, *v)
}

// omitStr writes the member only when v is set: for a member added to a
// kind after entries of it were written.
func (o *object) omitStr(n string, v *string) *object {
	if v == nil {
		return o
	}
	return o.str(n, *v)
}

// omitTime is omitStr for a time.
func (o *object) omitTime(n string, t *time.Time) *object {
	if t == nil {
		return o
	}
	return o.time(n, t)
}

func (o *object) int(n string, v int64) *object {
	o.name(n).b.WriteString(strconv.FormatInt(v, 10))
	return o
}

func (o *object) optInt(n string, v *int32) *object {
	if v == nil {
		o.name(n).b.WriteString("null")
		return o
	}
	return o.int(n, int64(*v))
}

func (o *object) bool(n string, v bool) *object {
	o.name(n).b.WriteString(strconv.FormatBool(v))
	return o
}

func (o *object) time(n string, t *time.Time) *object {
	if s := Time(t); s != nil {
		return o.str(n, *s)
	}
	o.name(n).b.WriteString("null")
	return o
}

func (o *object) hex(n string, b []byte) *object { return o.str(n, hex.EncodeToString(b)) }

// sha is the SHA-256 of a text, for members that stand for a large one.
func (o *object) sha(n, text string) *object {
	s := TextSHA256(text)
	return o.hex(n, s[:])
}

// TextSHA256 is sha256.Sum256([]byte(text)) without the copy: the hash
// only reads its input, and a packet's rendered text (~45 KB) was copied
// for each of its two digests.
func TextSHA256(text string) [sha256.Size]byte {
	return sha256.Sum256(unsafe.Slice(unsafe.StringData(text), len(text)))
}

func (o *object) json(n string, raw []byte) *object {
	c, err := CanonicalJSON(raw)
	if err != nil {
		if o.err == nil {
			o.err = err
		}
		c = []byte("null")
	}
	o.name(n).b.Write(c)
	return o
}

func (o *object) strs(n string, v []string) *object {
	o.name(n).b.WriteByte('[')
	for i, s := range v {
		if i > 0 {
			o.b.WriteByte(',')
		}
		canonicalString(&o.b, s)
	}
	o.b.WriteByte(']')
	return o
}

func (o *object) raw(n string, v []byte) *object {
	o.name(n).b.Write(v)
	return o
}

func (o *object) bytes() ([]byte, error) {
	if o.err != nil {
		return nil, o.err
	}
	o.b.WriteByte('}')
	return o.b.Bytes(), nil
}
