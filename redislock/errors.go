package redislock

import (
	"errors"

	"github.com/redis/rueidis"
)

// ServerReply returns the text of the error reply from the Redis server
// that err carries (WRONGPASS, NOPERM, READONLY, OOM, a script's error,
// ...) and true; false when the server said nothing of the kind (a
// timeout, a network error, a closed client). A nil reply counts as a
// reply (see IsNilReply). Callers branch on it instead of on the client
// library's error types, which stay inside this package.
func ServerReply(err error) (string, bool) {
	var re *rueidis.RedisError
	if errors.As(err, &re) {
		return re.Error(), true
	}
	return "", false
}

// Refused reports whether err is the server's own answer (ServerReply),
// such as an ACL's NOPERM refusing a subscription, rather than a lost
// connection or a timeout (cluster.Announcer, cluster.RunRequestStore).
func (r *Redis) Refused(err error) bool { _, ok := ServerReply(err); return ok }

// Refused is Redis.Refused; it needs no client.
func (l *Lazy) Refused(err error) bool { _, ok := ServerReply(err); return ok }

// IsNilReply reports whether err is the server's nil reply (no value).
func IsNilReply(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && re.IsNil()
}

// IsClosing reports whether err says the client was closed.
func IsClosing(err error) bool { return errors.Is(err, rueidis.ErrClosing) }
