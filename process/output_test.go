package process

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestLineWriter_Pieces(t *testing.T) {
	tests := []struct {
		in   string
		want []string // "+" suffix: partial=true
	}{
		{"abc\n", []string{"abc"}},
		{"abcd\n", []string{"abcd"}},
		{"abcde\n", []string{"abcd+", "e"}},
		{"abcdefgh\nx\n", []string{"abcd+", "efgh", "x"}},
		{"abcdefghi", []string{"abcd+", "efgh+", "i"}},
		{"ab\r\n\r\n", []string{"ab", ""}},
		{"a\rb\n", []string{"a\rb"}},
		{"\n\n", []string{"", ""}},
		{"tail", []string{"tail"}},
		{"", nil},
	}
	for _, tt := range tests {
		for _, chunk := range []int{1, 3, 1 << 20} {
			core, logs := observer.New(zapcore.InfoLevel)
			w := newLineWriter(zap.New(core), "stdout", 4)
			for in := []byte(tt.in); len(in) > 0; {
				n := min(chunk, len(in))
				w.Write(in[:n])
				in = in[n:]
			}
			w.Flush()
			var got []string
			for _, e := range logs.AllUntimed() {
				m := e.ContextMap()
				l := m["line"].(string)
				if m["partial"] == true {
					l += "+"
				}
				if m["stream"] != "stdout" || e.Message != "job output" {
					t.Errorf("got entry %q %v", e.Message, m)
				}
				got = append(got, l)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("%q in chunks of %d: got %q, want %q", tt.in, chunk, got, tt.want)
			}
		}
	}
}

func TestTailBuffer_KeepsLastBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 7, 64} {
		tb := NewTail(size)
		var all []byte
		for range 200 {
			p := make([]byte, r.IntN(3*size+2))
			for i := range p {
				p[i] = byte('a' + r.IntN(26))
			}
			tb.Write(p)
			all = append(all, p...)
			want := all[max(0, len(all)-size):]
			if got := tb.Bytes(); !bytes.Equal(got, want) {
				t.Fatalf("size %d after %d bytes: got %q, want %q", size, len(all), got, want)
			}
		}
	}
}

// A run that writes one line must not cost the whole tail: the buffer grows
// with the output and becomes the fixed ring only once it is full.
func TestTailBuffer_GrowsWithOutput(t *testing.T) {
	tb := NewTail(DefaultTailSize)
	tb.Write([]byte("one line\n"))
	if c := cap(tb.buf); c >= DefaultTailSize/2 {
		t.Errorf("after 9 bytes: capacity %d, want far below the tail size %d", c, DefaultTailSize)
	}
	tb.Write(make([]byte, DefaultTailSize))
	if l := len(tb.buf); l != DefaultTailSize {
		t.Errorf("after more than the tail size: length %d, want the ring of %d", l, DefaultTailSize)
	}
}
