package web

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// perPage is how many jobs a page of the jobs list shows.
const perPage = 50

// jobsFilter is the jobs list's query: ?status=&tag=&node=&q=&page=.
type jobsFilter struct {
	Status, Tag, Node, Q string
	Page                 int
}

// readFilter reads the query; a bad page number is page 1.
func readFilter(q url.Values) jobsFilter {
	f := jobsFilter{Status: q.Get("status"), Tag: q.Get("tag"), Node: q.Get("node"), Q: strings.TrimSpace(q.Get("q"))}
	f.Page, _ = strconv.Atoi(q.Get("page"))
	f.Page = max(f.Page, 1)
	return f
}

// match reports whether row passes the filter: status equal, tag one of
// the job's nodes: selectors, node one of the live nodes that may run it
// or runs it, q a substring of its name (case-insensitive).
func (f jobsFilter) match(row *jobRow, q string) bool {
	switch {
	case f.Status != "" && row.Status != f.Status:
		return false
	case f.Tag != "" && !slices.Contains(row.Nodes, f.Tag):
		return false
	case f.Node != "" && !slices.Contains(row.Runners, f.Node) && !slices.Contains(row.RunningOn, f.Node):
		return false
	case q != "" && !strings.Contains(strings.ToLower(row.Job), q):
		return false
	}
	return true
}

// URL is the list's address with the filter and page p.
func (f jobsFilter) URL(p int) string {
	v := url.Values{}
	for k, s := range map[string]string{"status": f.Status, "tag": f.Tag, "node": f.Node, "q": f.Q} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if p > 1 {
		v.Set("page", strconv.Itoa(p))
	}
	if len(v) == 0 {
		return "/ui/jobs"
	}
	return "/ui/jobs?" + v.Encode()
}

// jobsPage is the jobs list's data.
type jobsPage struct {
	Filter         jobsFilter
	Rows           []jobRow
	Total, Matched int
	Page, Pages    int
	First, Last    int // 1-based positions of the first and last row shown
	Statuses       []string
	Tags, Nodes    []string // the filter's choices
	Prev, Next     string   // links; "" at either end
}

// jobs answers GET /ui/jobs: the configured jobs, filtered and paged on
// the server.
func (s *server) jobs(w http.ResponseWriter, r *http.Request, a access) {
	snap, ok := s.snapshot(w, r, false)
	if !ok {
		return
	}
	s.render(w, r, http.StatusOK, "jobs", a, "Jobs", buildJobsPage(snap, readFilter(r.URL.Query())))
}

// buildJobsPage filters and pages the snapshot's jobs.
func buildJobsPage(snap *snapshot, f jobsFilter) jobsPage {
	p := jobsPage{Filter: f, Total: len(snap.Jobs), Statuses: statuses}
	q := strings.ToLower(f.Q)
	start := (f.Page - 1) * perPage
	tags := map[string]bool{}
	for i := range snap.Jobs {
		row := &snap.Jobs[i]
		for _, t := range row.Nodes {
			tags[t] = true
		}
		if !f.match(row, q) {
			continue
		}
		if p.Matched >= start && len(p.Rows) < perPage {
			p.Rows = append(p.Rows, *row)
		}
		p.Matched++
	}
	for t := range tags {
		p.Tags = append(p.Tags, t)
	}
	slices.Sort(p.Tags)
	for _, n := range snap.Cluster.Nodes {
		p.Nodes = append(p.Nodes, n.NodeID)
	}
	slices.Sort(p.Nodes)
	p.Pages = max(1, (p.Matched+perPage-1)/perPage)
	p.Page = min(f.Page, p.Pages)
	if len(p.Rows) > 0 {
		p.First, p.Last = start+1, start+len(p.Rows)
	}
	if p.Page > 1 {
		p.Prev = f.URL(p.Page - 1)
	}
	if f.Page < p.Pages {
		p.Next = f.URL(f.Page + 1)
	}
	return p
}
