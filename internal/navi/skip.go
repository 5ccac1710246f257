package navi

// skip reads one JSON value from pos as serde_json's ignore_value does —
// the grammar of RFC 8259, strings checked for control characters and
// escapes only, no nesting limit — and returns its bytes.
func (c *cursor) skip(ptr string) ([]byte, error) {
	c.ws()
	start := c.pos
	var stack []byte // the open containers' closing bytes
	for {
		opened, err := c.scalarOrOpen(ptr, &stack)
		if err != nil {
			return nil, err
		}
		for !opened {
			if len(stack) == 0 {
				return c.data[start:c.pos], nil
			}
			closing := stack[len(stack)-1]
			b := c.peek()
			if b == closing {
				c.pos++
				stack = stack[:len(stack)-1]
				continue
			}
			if b != ',' {
				return nil, c.fail(ptr, "expected ',' or %q", closing)
			}
			c.pos++
			if closing == '}' {
				if err := c.memberName(ptr); err != nil {
					return nil, err
				}
			}
			break
		}
	}
}

// scalarOrOpen reads a scalar, or opens a container: opened is true when
// a value must follow (after an object's first member name); an empty one
// is read whole.
func (c *cursor) scalarOrOpen(ptr string, stack *[]byte) (opened bool, err error) {
	switch b := c.peek(); b {
	case '{', '[':
		c.pos++
		closing := b + 2
		if c.peek() == closing {
			c.pos++
			return false, nil
		}
		*stack = append(*stack, closing)
		if b == '{' {
			return true, c.memberName(ptr)
		}
		return true, nil
	case '"':
		return false, c.skipString(ptr)
	case 't':
		return false, c.literal(ptr, "true")
	case 'f':
		return false, c.literal(ptr, "false")
	case 'n':
		return false, c.literal(ptr, "null")
	case 0:
		if c.pos >= len(c.data) {
			return false, c.fail(ptr, "unexpected end of input, expected a value")
		}
	}
	return false, c.number(ptr)
}

// memberName reads `"name" :` before a member's value.
func (c *cursor) memberName(ptr string) error {
	if c.peek() != '"' {
		return c.fail(ptr, "key must be a string")
	}
	if err := c.skipString(ptr); err != nil {
		return err
	}
	if c.peek() != ':' {
		return c.fail(ptr, "expected ':'")
	}
	c.pos++
	return nil
}

func (c *cursor) literal(ptr, word string) error {
	if len(c.data)-c.pos < len(word) || string(c.data[c.pos:c.pos+len(word)]) != word {
		return c.fail(ptr, "expected %s", word)
	}
	c.pos += len(word)
	return nil
}

// skipString reads a string from its opening quote.
func (c *cursor) skipString(ptr string) error {
	c.pos++
	for c.pos < len(c.data) {
		b := c.data[c.pos]
		c.pos++
		switch {
		case b == '"':
			return nil
		case b < 0x20:
			return c.fail(ptr, "control character (\\u0000-\\u001F) found while parsing a string")
		case b == '\\':
			if c.pos >= len(c.data) {
				return c.fail(ptr, "unexpected end of input in a string")
			}
			e := c.data[c.pos]
			c.pos++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for range 4 {
					if c.pos >= len(c.data) || !isHex(c.data[c.pos]) {
						return c.fail(ptr, "invalid \\u escape")
					}
					c.pos++
				}
			default:
				return c.fail(ptr, "invalid escape")
			}
		}
	}
	return c.fail(ptr, "unexpected end of input in a string")
}

func isHex(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (c *cursor) number(ptr string) error {
	d := c.data
	if c.pos < len(d) && d[c.pos] == '-' {
		c.pos++
	}
	switch {
	case c.pos < len(d) && d[c.pos] == '0':
		c.pos++
	case c.pos < len(d) && isDigit(d[c.pos]):
		for c.pos < len(d) && isDigit(d[c.pos]) {
			c.pos++
		}
	default:
		return c.fail(ptr, "expected a value")
	}
	if c.pos < len(d) && isDigit(d[c.pos]) {
		return c.fail(ptr, "invalid number (a leading zero)")
	}
	if c.pos < len(d) && d[c.pos] == '.' {
		c.pos++
		if err := c.digits(ptr); err != nil {
			return err
		}
	}
	if c.pos < len(d) && (d[c.pos] == 'e' || d[c.pos] == 'E') {
		c.pos++
		if c.pos < len(d) && (d[c.pos] == '+' || d[c.pos] == '-') {
			c.pos++
		}
		if err := c.digits(ptr); err != nil {
			return err
		}
	}
	return nil
}

func (c *cursor) digits(ptr string) error {
	if c.pos >= len(c.data) || !isDigit(c.data[c.pos]) {
		return c.fail(ptr, "invalid number")
	}
	for c.pos < len(c.data) && isDigit(c.data[c.pos]) {
		c.pos++
	}
	return nil
}
