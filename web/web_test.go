package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/ledger/memory"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// get sends a GET with the cookies given and returns the recorder.
func (fx *fixture) do(t *testing.T, method, path string, form url.Values, hdr map[string]string, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	t.Helper()
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req := httptest.NewRequest(method, "http://dash.test"+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	fx.h.ServeHTTP(rec, req)
	return rec
}

// login signs in with token and returns the session cookie.
func (fx *fixture) login(t *testing.T, token string) *http.Cookie {
	t.Helper()
	rec := fx.do(t, "POST", "/ui/login", url.Values{"token": {token}, "next": {"/ui/jobs"}}, nil)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/ui/jobs" {
		t.Fatalf("POST /ui/login: %d to %q, want 303 to /ui/jobs", rec.Code, rec.Header().Get("Location"))
	}
	for _, c := range rec.Result().Cookies() {
		if c.Name == cookieName {
			return c
		}
	}
	t.Fatal("POST /ui/login set no session cookie")
	return nil
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func TestPages_RenderWithoutSecrets(t *testing.T) {
	fx := newFixture(t, config.AuthWrites)
	// Every page of the fixture, with a text each must show.
	pages := map[string]string{
		"/ui/": "Last 24 hours", "/ui/jobs": "backup", "/ui/jobs?status=failing": "backup",
		"/ui/jobs/backup": "failure (exit 2)", "/ui/jobs/report": "db migration", "/ui/jobs/idle": "America/New_York",
		"/ui/jobs/backup/runs/" + fx.store.occ["backup"][1].ID: "disk full", "/ui/nodes": "n1.local", "/ui/login": "Sign in",
		"/ui/assets/style.css": "cronlock dashboard", "/ui/assets/app.js": "data-live",
	}
	cookie := fx.login(t, "op-token-123")
	for path, want := range pages {
		for _, c := range []*http.Cookie{nil, cookie} {
			var cs []*http.Cookie
			if c != nil {
				cs = append(cs, c)
			}
			rec := fx.do(t, "GET", path, nil, nil, cs...)
			body := rec.Body.String()
			if rec.Code != 200 || !strings.Contains(body, want) {
				t.Errorf("GET %s (session %v): %d, want 200 showing %q:\n%s", path, c != nil, rec.Code, want, body)
			}
			for _, secret := range []string{secretValue, "op-token-123", "DB_PASSWORD="} {
				if strings.Contains(body, secret) {
					t.Errorf("GET %s shows the secret %q", path, secret)
				}
			}
			if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
				t.Errorf("GET %s refers to another origin:\n%s", path, body)
			}
		}
	}
}

func TestOverview_FailuresFirst(t *testing.T) {
	fx := newFixture(t, config.AuthWrites)
	body := fx.do(t, "GET", "/ui/", nil, nil).Body.String()
	problems, running, next := strings.Index(body, `id="problem-list"`), strings.Index(body, `id="now"`), strings.Index(body, `id="next"`)
	if problems < 0 || !(problems < running && running < next) {
		t.Fatalf("overview sections at %d (failures), %d (running), %d (next): want failures first, then running, then next", problems, running, next)
	}
	list := body[problems:running]
	if b, r := strings.Index(list, "/ui/jobs/backup/runs/"), strings.Index(list, "/ui/jobs/report/runs/"); b < 0 || r < 0 {
		t.Errorf("failure list: want backup's failures and report's missed slot linked to their runs:\n%s", list)
	}
	for _, want := range []string{`<b>2</b> failed`, `<b>1</b> missed`, `href="/ui/jobs?status=failing"`} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
}

// The run page's second pass redacts as the node does: each line of a
// multi-line env value, and the whole value where it is found whole.
func TestRun_RedactsEachLineOfMultiLineValue(t *testing.T) {
	j := config.Job{Env: map[string]string{"TLS_KEY": "-----BEGIN KEY-----\r\nMIIEvQIBADANBg\n-----END KEY-----\n"}}
	out := "key: -----BEGIN KEY-----\nline 2: MIIEvQIBADANBg\ndone\n" + j.Env["TLS_KEY"]
	want := "key: [redacted env TLS_KEY]\nline 2: [redacted env TLS_KEY]\ndone\n[redacted env TLS_KEY]"
	if got := redact(out, &j); got != want {
		t.Errorf("redact: got %q, want %q", got, want)
	}
}

func TestJob_SaysWhyEachOccurrenceDidNotRun(t *testing.T) {
	fx := newFixture(t, config.AuthWrites)
	body := fx.do(t, "GET", "/ui/jobs/report", nil, nil).Body.String()
	for _, want := range []string{
		"not run: the job was paused [paused], decided by n2 (by ops@host: &#34;db migration&#34;)",
		"not run: the previous run still held the lease (overlap: skip) [overlap], decided by n1",
		"missed: not_claimed: no live node claimed it",
		"ran on n1: success (exit 0)"[:len("ran on n1: success")],
		`<svg class="timeline"`,
		"at minute 0 of every hour (Europe/Paris)",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("job page lacks %q:\n%s", want, body)
		}
	}
}

func TestJob_DSTNoteAmongNextRuns(t *testing.T) {
	fx := newFixture(t, config.AuthWrites)
	body := fx.do(t, "GET", "/ui/jobs/idle", nil, nil).Body.String()
	for _, want := range []string{`id="dst"`, "clocks in America/New_York go forward", "clocks in America/New_York change before this one"} {
		if !strings.Contains(body, want) {
			t.Errorf("job page of a 02:30 New York job on the day DST starts lacks %q", want)
		}
	}
}

func TestRun_ShowsOutputRedacted(t *testing.T) {
	fx := newFixture(t, config.AuthWrites)
	body := fx.do(t, "GET", "/ui/jobs/backup/runs/"+fx.store.occ["backup"][1].ID, nil, nil).Body.String()
	if !strings.Contains(body, "connecting with [redacted env DB_PASSWORD]\nerror: disk full") || strings.Contains(body, secretValue) {
		t.Errorf("run page: want the output with the env value redacted:\n%s", body)
	}
	if rec := fx.do(t, "GET", "/ui/jobs/backup/runs/123", nil, nil); rec.Code != 404 {
		t.Errorf("GET a run that is not in the ledger: %d, want 404", rec.Code)
	}
}

func TestJobs_FiltersAndPages(t *testing.T) {
	fx := newFixture(t, config.AuthWrites)
	for q, want := range map[string][]string{
		"status=failing": {"backup"}, "status=never": {"idle"}, "q=REP": {"report"}, "node=old": {},
		"node=n2": {"backup", "report", "idle"},
	} {
		body := fx.do(t, "GET", "/ui/jobs?"+q, nil, nil).Body.String()
		table := body[strings.Index(body, `<table id="jobs">`):]
		for _, j := range []string{"backup", "report", "idle"} {
			shown := strings.Contains(table, `href="/ui/jobs/`+j+`"`)
			if shown != contains(want, j) {
				t.Errorf("GET /ui/jobs?%s: %s shown %v, want the jobs %q", q, j, shown, want)
			}
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestAuthAll_PagesNeedSession(t *testing.T) {
	fx := newFixture(t, config.AuthAll)
	rec := fx.do(t, "GET", "/ui/jobs/backup", nil, nil)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/ui/login?next=%2Fui%2Fjobs%2Fbackup" {
		t.Fatalf("GET a page without a session under http.auth all: %d to %q, want 303 to the sign-in form", rec.Code, rec.Header().Get("Location"))
	}
	if rec := fx.do(t, "POST", "/ui/login", url.Values{"token": {"wrong"}}, nil); rec.Code != 401 || strings.Contains(rec.Body.String(), "Set-Cookie") {
		t.Errorf("sign-in with a wrong token: %d, want 401", rec.Code)
	}
	for _, c := range []*http.Cookie{{Name: cookieName, Value: "99999999999.deadbeef"}, {Name: cookieName, Value: newSession([]byte("other"), fx.now)}} {
		if rec := fx.do(t, "GET", "/ui/", nil, nil, c); rec.Code != http.StatusSeeOther {
			t.Errorf("GET with a forged session %q: %d, want 303 to sign in", c.Value, rec.Code)
		}
	}
	cookie := fx.login(t, " op-token-123\n")
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/ui/" || strings.Contains(cookie.Value, "op-token") {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, path /ui/, not holding the token", cookie)
	}
	if rec := fx.do(t, "GET", "/ui/jobs/backup", nil, nil, cookie); rec.Code != 200 {
		t.Errorf("GET with the session: %d, want 200", rec.Code)
	}
	if rec := fx.do(t, "GET", "/ui/", nil, map[string]string{"Authorization": "Bearer op-token-123"}); rec.Code != 200 {
		t.Errorf("GET with the bearer header: %d, want 200", rec.Code)
	}
	fx.token = []byte("rotated")
	if rec := fx.do(t, "GET", "/ui/", nil, nil, cookie); rec.Code != http.StatusSeeOther {
		t.Errorf("GET with a session of the token before rotation: %d, want 303 to sign in", rec.Code)
	}
}

func TestWrite_NeedsOperatorSessionAndCSRF(t *testing.T) {
	fx := newFixture(t, config.AuthWrites)
	pause := url.Values{"note": {"maintenance"}}
	if rec := fx.do(t, "POST", "/ui/jobs/backup/pause", pause, nil); rec.Code != 401 {
		t.Errorf("pause without a session: %d, want 401", rec.Code)
	}
	cookie := fx.login(t, "op-token-123")
	if rec := fx.do(t, "POST", "/ui/jobs/backup/pause", pause, nil, cookie); rec.Code != 403 || !strings.Contains(rec.Body.String(), "CSRF") {
		t.Errorf("pause with the session and no CSRF token: %d, want 403", rec.Code)
	}
	page := fx.do(t, "GET", "/ui/jobs/backup", nil, nil, cookie).Body.String()
	m := csrfRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("job page with a session has no CSRF token in its forms:\n%s", page)
	}
	withCSRF := url.Values{"note": {"maintenance"}, "csrf": {m[1]}}
	for name, hdr := range map[string]map[string]string{
		"Origin of another site": {"Origin": "http://evil.test"},
		"Sec-Fetch-Site":         {"Sec-Fetch-Site": "cross-site"},
	} {
		if rec := fx.do(t, "POST", "/ui/jobs/backup/pause", withCSRF, hdr, cookie); rec.Code != 403 {
			t.Errorf("pause with a cross-site %s: %d, want 403", name, rec.Code)
		}
	}
	if fx.store.states["backup"].Paused {
		t.Fatal("a refused request paused the job")
	}
	rec := fx.do(t, "POST", "/ui/jobs/backup/pause", withCSRF, map[string]string{"Origin": "http://dash.test", "Sec-Fetch-Site": "same-origin"}, cookie)
	if rec.Code != http.StatusSeeOther || !fx.store.states["backup"].Paused || fx.store.states["backup"].Pause.Note != "maintenance" {
		t.Fatalf("pause with the session and CSRF token: %d, paused %v; want 303 and the job paused with the note", rec.Code, fx.store.states["backup"].Paused)
	}
	if by := fx.store.states["backup"].Pause.By; !strings.HasPrefix(by, "ui(") {
		t.Errorf("pause recorded by %q, want ui(ADDR)@NODE", by)
	}
	if body := fx.do(t, "GET", rec.Header().Get("Location"), nil, nil, cookie).Body.String(); !strings.Contains(body, "Paused.") {
		t.Errorf("page after the pause does not say it was paused")
	}
	if rec := fx.do(t, "POST", "/ui/jobs/backup/resume", url.Values{"csrf": {m[1]}}, nil, cookie); rec.Code != 303 || fx.store.states["backup"].Paused {
		t.Errorf("resume: %d, paused %v; want 303 and resumed", rec.Code, fx.store.states["backup"].Paused)
	}
	if rec := fx.do(t, "POST", "/ui/jobs/report/run", url.Values{}, map[string]string{"Authorization": "Bearer op-token-123"}); rec.Code != 303 ||
		len(fx.ran) != 1 || fx.ran[0] != "report" {
		t.Errorf("run now with the bearer header: %d, ran %q; want 303 and report run", rec.Code, fx.ran)
	}
	if rec := fx.do(t, "POST", "/ui/jobs/report/run", url.Values{}, map[string]string{"Authorization": "Bearer nope"}); rec.Code != 401 {
		t.Errorf("run now with a wrong bearer token: %d, want 401", rec.Code)
	}
}

func TestWrite_DisabledWithoutToken(t *testing.T) {
	fx := newFixture(t, config.AuthWrites)
	fx.token = nil
	if rec := fx.do(t, "POST", "/ui/jobs/backup/pause", url.Values{}, map[string]string{"Authorization": "Bearer "}); rec.Code != 403 {
		t.Errorf("pause on a daemon without a token: %d, want 403", rec.Code)
	}
	if body := fx.do(t, "GET", "/ui/login", nil, nil).Body.String(); !strings.Contains(body, "has no API token") {
		t.Errorf("sign-in form of a daemon without a token does not say so")
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{"/ui/jobs?q=a": "/ui/jobs?q=a", "//evil.test/ui/": "/ui/", "http://evil.test/": "/ui/",
		"/api/v1/jobs": "/ui/", "/ui/\\evil": "/ui/", "": "/ui/"} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDescribe(t *testing.T) {
	for expr, want := range map[string]string{
		"*/10 * * * *":    "every 10 minutes (UTC)",
		"0 * * * *":       "at minute 0 of every hour (UTC)",
		"30 2 * * *":      "at 02:30 every day (UTC)",
		"0 9 * * 1-5":     "at 09:00 on weekdays (Monday to Friday) (UTC)",
		"0 0 1 1 *":       "at 00:00 on day 1 of the month in January (UTC)",
		"* * * * * *":     "every second (UTC)",
		"20,50 * * * * *": "at second 20,50 of every minute (UTC)",
		"@daily":          "at 00:00 every day (UTC)",
		"@every 10m":      "every 10m, aligned to the clock (UTC)",
		"0 9 * * 1":       "at 09:00 every Monday (UTC)",
	} {
		j := testJob(t, "x", expr, "UTC")
		if got := describe(j.Sched, expr); got != want {
			t.Errorf("describe(%q) = %q, want %q", expr, got, want)
		}
	}
}

// The run page lists the kept results of the run's hook (the store's
// HookResults), and says so when none is kept.
func TestRun_ShowsHookResults(t *testing.T) {
	fx := newFixture(t, config.AuthWrites)
	fx.jobs[0].OnFailure = "page-oncall"
	store := memory.NewOutput()
	occ := fx.store.occ["backup"][1].ID
	at := fx.now.Add(-19 * time.Minute)
	if err := store.StoreHookResult(context.Background(), "backup", occ, ledger.HookResult{Hook: "on_failure", Result: "timeout",
		ExitCode: -1, Started: at, Finished: at.Add(30 * time.Second), Output: "paging [redacted env DB_PASSWORD]\n"}, ledger.Retention{Age: time.Hour}); err != nil {
		t.Fatal(err)
	}
	o := fx.api
	o.Output = func() (ledger.OutputStore, error) { return store, nil }
	fx.h = New(Options{API: o, CacheFor: -1})
	body := fx.do(t, "GET", "/ui/jobs/backup/runs/"+occ, nil, nil).Body.String()
	for _, want := range []string{`id="hooks"`, `data-result="timeout"`, "on_failure", "30s", "paging [redacted env DB_PASSWORD]"} {
		if !strings.Contains(body, want) {
			t.Errorf("run page with a kept hook result: no %q in\n%s", want, body)
		}
	}
	body = fx.do(t, "GET", "/ui/jobs/backup/runs/"+fx.store.occ["backup"][2].ID, nil, nil).Body.String()
	if !strings.Contains(body, `id="no-hooks"`) {
		t.Errorf("run page without a kept hook result: want the no-hooks note:\n%s", body)
	}
}
