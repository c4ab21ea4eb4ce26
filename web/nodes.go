package web

import (
	"net/http"
	"slices"

	"github.com/cronlock/cronlock/api"
)

// nodesPage is the nodes page's data.
type nodesPage struct {
	Cluster *api.Cluster
	Live    []api.NodeRow // sorted by id
	Gone    []api.NodeRow
	Backend Backend
}

// nodes answers GET /ui/nodes: live and gone nodes, their heartbeat age,
// tags, runs in progress and config drift, and the backend's health as
// this node sees it.
func (s *server) nodes(w http.ResponseWriter, r *http.Request, a access) {
	st, ctx, cancel, ok := s.storeFor(w, r)
	if !ok {
		return
	}
	defer cancel()
	c, err := api.Nodes(ctx, st, s.o.Now())
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	p := nodesPage{Cluster: c}
	if s.be != nil {
		p.Backend = s.be()
	}
	for _, n := range c.Nodes {
		if n.State == "live" {
			p.Live = append(p.Live, n)
		} else {
			p.Gone = append(p.Gone, n)
		}
	}
	byID := func(a, b api.NodeRow) int {
		if a.NodeID < b.NodeID {
			return -1
		}
		if a.NodeID > b.NodeID {
			return 1
		}
		return 0
	}
	slices.SortFunc(p.Live, byID)
	slices.SortFunc(p.Gone, byID)
	s.render(w, r, http.StatusOK, "nodes", a, "Nodes", p)
}
