package config

import "bytes"

// tomlTooDeep returns the line at which data nests deeper than maxDepth
// levels, or 0. It runs before go-toml, whose parser recurses once per
// nested inline array or table and overflows the stack on deep input.
//
// It is a scan, not a parser: strings (basic, literal and their multi-line
// forms, per TOML 1.0) and comments are skipped, and it counts the levels
// a decoder would build — the top-level table, one per segment of a table
// header (`[[…]]` adds its list), one per dot of a dotted key, one per
// inline `[` or `{`. On input that is not TOML it may stop early; go-toml
// then reports the syntax error. FuzzParseTOML checks that whatever go-toml
// decodes after the scan passed is within maxDepth.
func tomlTooDeep(data []byte) int {
	s := tomlScan{data: data, line: 1, table: 1, cur: 1, topKey: true}
	for s.i < len(data) {
		if s.step() {
			return s.line
		}
	}
	return 0
}

// tomlFrame is one open inline array or table.
type tomlFrame struct {
	table   bool // `{`, else `[`
	inKey   bool // an inline table, before the `=` of its current key
	keyDots int  // dots of that key so far
}

type tomlScan struct {
	data    []byte
	i, line int
	table   int // levels of the current [table] header, top level included
	topDots int // dots of the current top-level key
	topKey  bool
	stack   []tomlFrame
	cur     int // table + topDots + one per frame and its key dots
}

// inKey reports whether the scan is inside a key (before its `=`).
func (s *tomlScan) inKey() bool {
	if len(s.stack) == 0 {
		return s.topKey
	}
	return s.stack[len(s.stack)-1].inKey
}

// step consumes one token and reports whether the depth went over
// maxDepth.
func (s *tomlScan) step() bool {
	c := s.data[s.i]
	switch {
	case c == '\n':
		s.line++
		if len(s.stack) == 0 {
			s.cur -= s.topDots
			s.topDots, s.topKey = 0, true
		}
	case c == '#':
		if j := bytes.IndexByte(s.data[s.i:], '\n'); j >= 0 {
			s.i += j
			return false // the newline is handled as such
		}
		s.i = len(s.data)
		return false
	case c == '"' || c == '\'':
		s.skipString(c)
		return false
	case c == '[' && len(s.stack) == 0 && s.topKey:
		return s.header()
	case c == '[' || c == '{':
		s.stack = append(s.stack, tomlFrame{table: c == '{', inKey: c == '{'})
		s.cur++
	case (c == ']' || c == '}') && len(s.stack) > 0:
		s.cur -= 1 + s.stack[len(s.stack)-1].keyDots
		s.stack = s.stack[:len(s.stack)-1]
	case c == '=' && s.inKey():
		s.setKey(false)
	case c == ',' && len(s.stack) > 0 && s.stack[len(s.stack)-1].table:
		f := &s.stack[len(s.stack)-1]
		s.cur -= f.keyDots
		f.keyDots, f.inKey = 0, true
	case c == '.' && s.inKey():
		if len(s.stack) == 0 {
			s.topDots++
		} else {
			s.stack[len(s.stack)-1].keyDots++
		}
		s.cur++
	}
	s.i++
	return s.cur > maxDepth
}

func (s *tomlScan) setKey(in bool) {
	if len(s.stack) == 0 {
		s.topKey = in
	} else {
		s.stack[len(s.stack)-1].inKey = in
	}
}

// header consumes a table header `[a.b]` or `[[a.b]]` at s.i and sets the
// table depth: the top level, one per segment, one more for `[[…]]`.
func (s *tomlScan) header() bool {
	levels := 2 // the top-level table and the first segment
	s.i++
	if s.i < len(s.data) && s.data[s.i] == '[' {
		levels++
		s.i++
	}
	for s.i < len(s.data) {
		switch c := s.data[s.i]; c {
		case '"', '\'':
			s.skipString(c)
			continue
		case '.':
			levels++
		case ']', '\n', '#':
			s.table, s.cur = levels, levels+s.topDots
			return s.cur > maxDepth // the rest of the line is scanned as usual
		}
		s.i++
	}
	return false
}

// skipString consumes the string starting at s.i with quote q, counting
// the lines inside multi-line strings. A single-line string ends at its
// quote or, unterminated, before the end of its line.
func (s *tomlScan) skipString(q byte) {
	triple := []byte{q, q, q}
	if bytes.HasPrefix(s.data[s.i:], triple) {
		s.i += 3
		for s.i < len(s.data) {
			switch c := s.data[s.i]; {
			case c == '\\' && q == '"':
				s.i++ // an escape; a backslash before a newline trims it
				if s.i < len(s.data) && s.data[s.i] == '\n' {
					s.line++
				}
			case c == '\n':
				s.line++
			case bytes.HasPrefix(s.data[s.i:], triple):
				s.i += 3
				for n := 0; n < 2 && s.i < len(s.data) && s.data[s.i] == q; n++ {
					s.i++ // up to two quotes may end the content (TOML 1.0)
				}
				return
			}
			s.i++
		}
		return
	}
	for s.i++; s.i < len(s.data); s.i++ {
		switch s.data[s.i] {
		case q:
			s.i++
			return
		case '\n':
			return
		case '\\':
			if q == '"' && s.i+1 < len(s.data) && s.data[s.i+1] != '\n' {
				s.i++
			}
		}
	}
}
