package trace

import (
	"fmt"
	"strconv"
	"strings"
)

// A pattern is a node name or label value of a cluster-file node group, where
// {i} is the node's index in its group (0..count-1). Arithmetic applies left
// to right, and a width pads with zeros:
//
//	"gpu-{i:03}"       gpu-000, gpu-001, ...
//	"r{i/16}"          r0 for nodes 0-15, r1 for 16-31, ...
//	"r{i/4%8:02}"      (i/4)%8, two digits
//
// This is deliberately smaller than text/template: it has no arithmetic, and a
// node group only ever needs to spread its index over racks and blocks.
type pattern []patternPart

type patternPart struct {
	text  string  // literal text, when ops is nil and !index
	index bool    // an {i} placeholder
	ops   []patOp // applied left to right to i
	width int     // zero-padded width; 0 for none
}

type patOp struct {
	op  byte // one of + - * / %
	arg int64
}

// parsePattern compiles s, or says what is wrong with it.
func parsePattern(s string) (pattern, error) {
	var p pattern
	for s != "" {
		open := strings.IndexAny(s, "{}")
		if open < 0 {
			p = append(p, patternPart{text: s})
			break
		}
		if s[open] == '}' {
			return nil, fmt.Errorf("unmatched '}' in %q", s)
		}
		if open > 0 {
			p = append(p, patternPart{text: s[:open]})
		}
		end := strings.IndexByte(s[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("unclosed '{' in %q", s)
		}
		part, err := parsePlaceholder(s[open+1 : open+end])
		if err != nil {
			return nil, err
		}
		p = append(p, part)
		s = s[open+end+1:]
	}
	return p, nil
}

// parsePlaceholder parses the inside of {...}: i, then ops, then :width.
func parsePlaceholder(s string) (patternPart, error) {
	part := patternPart{index: true}
	body, width, hasWidth := strings.Cut(strings.ReplaceAll(s, " ", ""), ":")
	if hasWidth {
		w, err := strconv.Atoi(width)
		if err != nil || w < 1 || w > 20 {
			return part, fmt.Errorf("{%s}: width %q must be 1..20 digits", s, width)
		}
		part.width = w
	}
	if !strings.HasPrefix(body, "i") {
		return part, fmt.Errorf("{%s}: a placeholder starts with i, the node's index in its group", s)
	}
	body = body[1:]
	for body != "" {
		op := body[0]
		if !strings.ContainsRune("+-*/%", rune(op)) {
			return part, fmt.Errorf("{%s}: unknown operator %q (want + - * / %%)", s, op)
		}
		body = body[1:]
		n := 0
		for n < len(body) && body[n] >= '0' && body[n] <= '9' {
			n++
		}
		arg, err := strconv.ParseInt(body[:n], 10, 64)
		if err != nil || arg > 1_000_000 {
			return part, fmt.Errorf("{%s}: %q needs a whole number 0..1000000 after it", s, op)
		}
		if arg == 0 && (op == '/' || op == '%') {
			return part, fmt.Errorf("{%s}: division by zero", s)
		}
		part.ops = append(part.ops, patOp{op: op, arg: arg})
		body = body[n:]
	}
	return part, nil
}

// expand renders the pattern for index i.
func (p pattern) expand(i int) string {
	var b strings.Builder
	for _, part := range p {
		if !part.index {
			b.WriteString(part.text)
			continue
		}
		v := int64(i)
		for _, o := range part.ops {
			switch o.op {
			case '+':
				v += o.arg
			case '-':
				v -= o.arg
			case '*':
				v *= o.arg
			case '/':
				v /= o.arg
			case '%':
				v %= o.arg
			}
		}
		fmt.Fprintf(&b, "%0*d", part.width, v)
	}
	return b.String()
}

// constant reports whether the pattern renders the same text for every index.
func (p pattern) constant() bool {
	for _, part := range p {
		if part.index {
			return false
		}
	}
	return true
}
