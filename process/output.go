package process

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync"

	"go.uber.org/zap"
)

var newline = []byte{'\n'}

// readBufSize is the size in bytes of each stream's read buffer.
const readBufSize = 32 << 10

// readBufs holds the read buffers of the streams being read: a run takes
// two for as long as it runs, instead of allocating 64 KiB (or growing two
// goroutine stacks by as much) per run.
var readBufs = sync.Pool{New: func() any { return new([readBufSize]byte) }}

// Tail keeps the last size bytes written to it. It grows with what is
// written (most runs write a line or nothing, and a run must not cost the
// full size in allocations) and becomes a fixed ring of size bytes once
// that much was written. It is safe for concurrent use; stdout and stderr
// share one, so the tail holds both streams interleaved as received.
type Tail struct {
	mu   sync.Mutex
	size int
	buf  []byte // len(buf) < size: growing, buf[:pos] is everything; else a ring
	pos  int    // next write index
	full bool   // the ring has wrapped at least once
}

// NewTail returns a Tail that keeps the last size bytes (0: none).
func NewTail(size int) *Tail {
	return &Tail{size: size}
}

// Write appends p, keeping only the last size bytes. It never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.write(p)
}

// write is Write with t.mu held.
func (t *Tail) write(p []byte) (int, error) {
	n := len(p)
	if t.size == 0 {
		return n, nil
	}
	if len(t.buf) < t.size {
		if t.pos+len(p) < t.size {
			t.buf = append(t.buf, p...)
			t.pos = len(t.buf)
			return n, nil
		}
		ring := make([]byte, t.size)
		copy(ring, t.buf[:t.pos])
		t.buf = ring
	}
	if len(p) >= len(t.buf) {
		copy(t.buf, p[len(p)-len(t.buf):])
		t.pos, t.full = 0, true
		return n, nil
	}
	c := copy(t.buf[t.pos:], p)
	if c < len(p) {
		t.pos = copy(t.buf, p[c:])
		t.full = true
	} else {
		t.pos += c
		if t.pos == len(t.buf) {
			t.pos, t.full = 0, true
		}
	}
	return n, nil
}

// WriteLine appends b and, when eol, a "\n", in one step: a line written
// by another goroutine never comes between them.
func (t *Tail) WriteLine(b []byte, eol bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.write(b)
	if eol {
		t.write(newline)
	}
}

// Bytes returns a copy of the retained bytes, oldest first.
func (t *Tail) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.full {
		return append([]byte(nil), t.buf[:t.pos]...)
	}
	out := make([]byte, 0, len(t.buf))
	out = append(out, t.buf[t.pos:]...)
	return append(out, t.buf[:t.pos]...)
}

// lineWriter splits one stream into lines. Each line, or piece of an
// over-long line, is redacted (Spec.Redact), kept in the tail, handed to
// Spec.Lines and logged at Info as "job output" with fields stream and line
// (a trailing "\r" is stripped from the logged line only). A line longer
// than max bytes is handled in pieces of max bytes; every piece but the last
// carries partial=true. With a Redactor a piece may end earlier, before a
// secret that would cross the cut (Redactor.cut), and the writer holds up to
// the Redactor's overlap more bytes to see such a secret whole: it holds at
// most max+overlap bytes. It is used by one goroutine only; the tail and
// Lines are shared with the other stream's.
type lineWriter struct {
	log     *zap.Logger
	stream  string
	max     int
	tail    *Tail                           // nil: kept from the raw reads (readStream)
	redact  *Redactor                       // nil: lines as read
	lines   func(line []byte, partial bool) // nil: none
	pending []byte                          // start of the current line, len(pending) <= max+redact.overlap()
}

func newLineWriter(log *zap.Logger, stream string, max int) *lineWriter {
	return &lineWriter{log: log, stream: stream, max: max} // pending grows only for a line split across reads
}

// Write consumes p completely; it never fails.
func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.appendPiece(p)
			break
		}
		if len(w.pending) == 0 && i <= w.max {
			w.emit(p[:i], false, true) // fast path: the whole line is in p
		} else {
			w.appendPiece(p[:i])
			w.endLine(true)
		}
		p = p[i+1:]
	}
	return n, nil
}

// appendPiece adds bytes of the current line, handling a full piece as
// partial once pending holds max+overlap bytes and more of the same line
// arrive.
func (w *lineWriter) appendPiece(b []byte) {
	hold := w.max + w.redact.overlap()
	for len(b) > 0 {
		if len(w.pending) == hold {
			w.cutPiece()
		}
		n := min(hold-len(w.pending), len(b))
		w.pending = append(w.pending, b[:n]...)
		b = b[n:]
	}
}

// cutPiece handles the first piece of pending as partial (at most max
// bytes, ending where no secret crosses the cut) and keeps the rest.
func (w *lineWriter) cutPiece() {
	at := w.redact.cut(w.pending, w.max)
	w.emit(w.pending[:at], true, false)
	w.pending = w.pending[:copy(w.pending, w.pending[at:])]
}

// endLine handles the rest of the current line in pieces of at most max
// bytes (eol: it ended with "\n").
func (w *lineWriter) endLine(eol bool) {
	for len(w.pending) > w.max {
		w.cutPiece()
	}
	w.emit(w.pending, false, eol)
	w.pending = w.pending[:0]
}

// Flush handles an unterminated last line, if any.
func (w *lineWriter) Flush() {
	if len(w.pending) > 0 {
		w.endLine(false)
	}
}

// emit handles one line or piece b (without its "\n"; eol: it had one).
func (w *lineWriter) emit(b []byte, partial, eol bool) {
	b = w.redact.Redact(b) // a nil Redactor returns b
	if w.tail != nil {
		w.tail.WriteLine(b, eol)
	}
	if w.lines != nil {
		w.lines(b, partial)
	}
	// Check first: a disabled or sampled-out entry costs no allocation.
	ce := w.log.Check(zap.InfoLevel, "job output")
	if ce == nil {
		return
	}
	if !partial {
		b = bytes.TrimSuffix(b, []byte("\r"))
	}
	// zap.String copies: cores may keep fields after Write returns.
	line := zap.String("line", string(b))
	if partial {
		ce.Write(zap.String("stream", w.stream), line, zap.Bool("partial", true))
		return
	}
	ce.Write(zap.String("stream", w.stream), line)
}

// readStream copies f into the line writer (and, when raw is not nil, the
// tail: output that is not redacted is kept as read, one lock per read
// instead of one per line) until EOF or until f
// is closed, then flushes the last line and closes done. A read error other
// than EOF or a closed file is stored in *errp before done is closed.
func readStream(f *os.File, raw *Tail, w *lineWriter, errp *error, done chan<- struct{}) {
	defer close(done)
	defer w.Flush()
	bp := readBufs.Get().(*[readBufSize]byte)
	defer readBufs.Put(bp)
	buf := bp[:]
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if raw != nil {
				raw.Write(buf[:n])
			}
			w.Write(buf[:n])
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				*errp = err
			}
			return
		}
	}
}
