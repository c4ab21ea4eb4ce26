package redislock

import (
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger/ledgertest"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/internal/redistest"
)

// PauseFor writes who, when, why and until with a TTL to the end, the
// claim then answers paused, State returns the record, and the event
// stream has the pause; ResumeBy lifts it, returns what it lifted and
// records who.
func TestRedis_AuditedPauseAndEvents(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{KeyPrefix: "{cl}:"})
	c := raw(t, srv.Addr())
	ctx := ledgertest.Ctx(t)
	at := time.Now().UTC().Truncate(time.Millisecond)
	p := ledger.Pause{By: "ops@box", At: at, Note: "db migration", Until: at.Add(10 * time.Second)}
	if err := r.PauseFor(ctx, "backup", p); err != nil {
		t.Fatal(err)
	}
	if ms, _ := c.Do(ctx, c.B().Pttl().Key("{cl}:paused:backup").Build()).AsInt64(); ms <= 9_000 || ms > 10_000 {
		t.Errorf("PTTL of the pause key: %d ms, want (9000, 10000]", ms)
	}
	ledgertest.MustClaim(t, r, ledgertest.LeaseReq("backup", time.Minute), ledger.Paused)
	st, err := r.State(ctx, "backup")
	if err != nil || !st.Paused || st.Pause == nil || *st.Pause != p {
		t.Fatalf("State: %+v (pause %+v), %v; want paused with %+v", st, st.Pause, err, p)
	}
	if err := r.PauseFor(ctx, "backup", ledger.Pause{By: "x", At: at, Until: at}); err == nil {
		t.Errorf("a pause ending at its start: got nil error")
	}
	old, err := r.ResumeBy(ctx, "backup", "dev@laptop", at.Add(time.Second))
	if err != nil || old == nil || old.Note != "db migration" {
		t.Fatalf("ResumeBy: %+v, %v; want the lifted pause", old, err)
	}
	if st, _ := r.State(ctx, "backup"); st.Paused {
		t.Errorf("after ResumeBy: still paused")
	}
	if old, err := r.ResumeBy(ctx, "backup", "dev@laptop", at.Add(2*time.Second)); err != nil || old != nil {
		t.Errorf("ResumeBy when not paused: %+v, %v; want nil, nil", old, err)
	}
	if err := r.AddEvents(ctx, map[string][]Event{"backup": {{Type: EventReload, At: at.Add(3 * time.Second), Node: "n1", ConfigHash: "abc"}}}); err != nil {
		t.Fatal(err)
	}
	evs, err := r.Events(ctx, "backup", 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.Type+" "+e.By+e.Node+" "+e.Note+e.ConfigHash)
	}
	want := []string{"reload n1 abc", "resume dev@laptop ", "resume dev@laptop ", "pause ops@box db migration"}
	if len(got) != len(want) {
		t.Fatalf("events newest first: got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d: got %q, want %q", i, got[i], want[i])
		}
	}
	if !evs[3].Until.Equal(p.Until) || !evs[3].At.Equal(at) {
		t.Errorf("pause event: at %v until %v, want %v and %v", evs[3].At, evs[3].Until, at, p.Until)
	}
}

// An event entry that cannot be decoded (written by hand, or by another
// version) is listed as type "unreadable" with the problem in its note and
// its time from the entry id; it does not hide the rest of the trail.
func TestRedis_UnreadableEventListed(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{KeyPrefix: "{cl}:"})
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if err := r.PauseFor(t.Context(), "j", ledger.Pause{By: "ops@h", At: at}); err != nil {
		t.Fatal(err)
	}
	srv.Do("XADD", "{cl}:events:j", "9999999999999-0", "type", "pause", "at", "notatime")
	evs, err := r.Events(t.Context(), "j", 10)
	if err != nil {
		t.Fatalf("Events: %v, want the readable ones and the unreadable one listed", err)
	}
	if len(evs) != 2 || evs[0].Type != EventUnreadable || !strings.Contains(evs[0].Note, "notatime") ||
		!evs[0].At.Equal(time.UnixMilli(9999999999999)) || evs[1].Type != EventPause || evs[1].By != "ops@h" {
		t.Errorf("got %+v, want the unreadable entry (at its id's time) then the pause", evs)
	}
}
