package redislock

import (
	"fmt"
	"slices"
	"testing"
)

// The cached keys of a job are the ones key() builds, in each script's
// KEYS order, for both key layouts; an append to them does not write into
// the cache; the cache starts again empty at maxCachedJobs.
func TestHotKeys(t *testing.T) {
	for _, tag := range []bool{false, true} {
		r := &Redis{prefix: "p:", tagIDs: tag}
		k := r.hot("backup")
		wantClaim := []string{r.key("job", "backup"), r.key("state", "backup"), r.key("paused", "backup"),
			r.key("pending", "backup"), r.key("backfill", "backup")}
		wantFinish := []string{r.key("job", "backup"), r.key("history", "backup"), r.key("state", "backup"), r.key("pending", "backup")}
		if !slices.Equal(k.claim, wantClaim) || !slices.Equal(k.finish, wantFinish) {
			t.Fatalf("tag %v: claim %q finish %q, want %q and %q", tag, k.claim, k.finish, wantClaim, wantFinish)
		}
		if tag && k.claim[0] != "p:job:{backup}" {
			t.Fatalf("cluster key %q, want p:job:{backup}", k.claim[0])
		}
		if r.hot("backup") != k {
			t.Fatal("a second call built the keys again")
		}
		_ = append(k.claim, "x")
		if got := r.hot("backup").claim; len(got) != 5 || cap(got) != 5 {
			t.Fatalf("cached claim keys changed by an append: %q (cap %d)", got, cap(got))
		}
	}
	r := &Redis{prefix: "p:"}
	for i := range maxCachedJobs {
		r.hot(fmt.Sprintf("j%d", i))
	}
	if n := len(r.keys.jobs); n != maxCachedJobs {
		t.Fatalf("%d jobs cached, want %d", n, maxCachedJobs)
	}
	r.hot("one-more")
	if n := len(r.keys.jobs); n != 1 {
		t.Fatalf("after the bound: %d jobs cached, want 1 (started again)", n)
	}
}
