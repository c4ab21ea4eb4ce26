package redislock

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger/ledgertest"

	"github.com/cronlock/cronlock/internal/redistest"
)

// A command a script calls that the ACL denies is named: Redis reports
// only the script's SHA1 and line, and the error says which command that
// line calls and what to grant.
func TestClaim_ACLDeniedScriptCommandIsNamed(t *testing.T) {
	srv := redistest.Start(t)
	srv.Do("ACL", "SETUSER", "cl", "on", ">pw", "~*", "+@all", "-zadd")
	r := newRedis(t, srv.Addr(), Options{Username: "cl", Password: "pw"})
	_, err := r.Claim(ledgertest.Ctx(t), ledgertest.LeaseReq("j", time.Second))
	var acl *ScriptACLError
	if !errors.As(err, &acl) || acl.Command != "ZADD" {
		t.Fatalf("claim without +zadd: got %v, want a ScriptACLError naming ZADD", err)
	}
	if want := "grant +zadd"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}
