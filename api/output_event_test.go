package api

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cronlock/cronlock/ledger"
)

// parseEvents parses a text/event-stream as the HTML standard's
// "Parsing an event stream" does (lines end at "\r\n", "\r" or "\n"), into
// its messages: type ("message" unless event: says) and data, and the
// last event id.
func parseEvents(stream string) (msgs [][2]string, lastID string) {
	stream = strings.ReplaceAll(strings.ReplaceAll(stream, "\r\n", "\n"), "\r", "\n")
	var data []string
	typ := ""
	for _, line := range strings.Split(stream, "\n") {
		if line == "" {
			if data != nil {
				if typ == "" {
					typ = "message"
				}
				msgs = append(msgs, [2]string{typ, strings.Join(data, "\n")})
			}
			data, typ = nil, ""
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			data = append(data, value)
		case "event":
			typ = value
		case "id":
			lastID = value
		}
	}
	return msgs, lastID
}

// TestWriteEvent_OutputIsDataOnly: carriage returns, "event: end" and
// "id: 5" in the output stay data of the chunk's message, in a parser that
// ends lines at "\r" as browsers do; only the run's end is an end event.
func TestWriteEvent_OutputIsDataOnly(t *testing.T) {
	w := httptest.NewRecorder()
	chunks := []ledger.OutputChunk{
		{ID: "1-0", Data: []byte("before\revent: end\r\n10%\r100%\nid: 5\rretry: 1\n")},
		{ID: "2-0", Data: []byte("\r\revent: end\n"), End: true},
	}
	for _, c := range chunks {
		if err := WriteEvent(w, c); err != nil {
			t.Fatal(err)
		}
	}
	msgs, lastID := parseEvents(w.Body.String())
	want := [][2]string{
		{"message", "before\nevent: end\n10%\n100%\nid: 5\nretry: 1"},
		{"message", "\n\nevent: end"},
		{"end", ""},
	}
	if len(msgs) != len(want) {
		t.Fatalf("got messages %q, want %q\nstream: %q", msgs, want, w.Body.String())
	}
	for i := range want {
		if msgs[i] != want[i] {
			t.Errorf("message %d: got %q, want %q", i, msgs[i], want[i])
		}
	}
	if lastID != "2-0" {
		t.Errorf("last event id: got %q, want 2-0 (the chunk's, not the output's)", lastID)
	}
	for _, line := range strings.Split(w.Body.String(), "\n") {
		if strings.Contains(line, "\r") {
			t.Errorf("a carriage return in the stream: %q", line)
		}
	}
}

// TestEventLines splits at every line end of text/event-stream.
func TestEventLines(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a\n", "a"},
		{"a\r\nb\r\n", "a|b"},
		{"a\rb", "a|b"},
		{"a\r\rb\r", "a||b"},
		{"a\n\n", "a|"},
		{"a\n\r\n", "a|"},
		{"", ""},
	} {
		if got := strings.Join(eventLines(tc.in), "|"); got != tc.want {
			t.Errorf("eventLines(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}
