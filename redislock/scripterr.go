package redislock

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// scriptSources maps each script's SHA1 to its source (filled by newScript
// while the package's variables are initialised, read-only afterwards), so
// that a server error that names a script by SHA1 and line can be read.
var scriptSources = map[string]string{}

// newScript is rueidis.NewLuaScript (or NewLuaScriptRetryable) with opts
// that also records src in scriptSources.
func newScript(src string, retryable bool, opts ...rueidis.LuaOption) *rueidis.Lua {
	h := sha1.Sum([]byte(src))
	scriptSources[hex.EncodeToString(h[:])] = src
	if retryable {
		return rueidis.NewLuaScriptRetryable(src, opts...)
	}
	return rueidis.NewLuaScript(src, opts...)
}

// ScriptACLError is a command a script calls that the server's ACL denies
// the user: Redis 7 reports it by the script's SHA1 and line ("The user
// executing the script can't run this command or subcommand script: SHA,
// on @user_script:LINE"), which ScriptACLError turns into the command.
type ScriptACLError struct {
	Command string // e.g. "HINCRBY"
	Line    int    // in the script's source
	Err     error  // the server's error
}

func (e *ScriptACLError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("the Redis ACL user may not run %s (called by a cronlock script): grant +%s (README.md, \"Redis ACL\"): %v",
			e.Command, strings.ToLower(e.Command), e.Err)
	}
	return fmt.Sprintf("the Redis ACL user may not run %s (called by a cronlock script, line %d): grant +%s (README.md, \"Redis ACL\"): %v",
		e.Command, e.Line, strings.ToLower(e.Command), e.Err)
}
func (e *ScriptACLError) Unwrap() error { return e.Err }

var (
	scriptDenied = regexp.MustCompile(`can't run this command or subcommand script: ([0-9a-f]{40}), on @user_script:(\d+)`)
	scriptCall   = regexp.MustCompile(`redis\.call\("([A-Za-z]+)"`)
)

// explainScript returns err as a *ScriptACLError when it is a server
// error that says a script's command is denied and the script is one of
// ours; otherwise err itself.
func explainScript(err error) error {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return err
	}
	m := scriptDenied.FindStringSubmatch(re.Error())
	if m == nil {
		return err
	}
	src, ok := scriptSources[m[1]]
	line, _ := strconv.Atoi(m[2])
	lines := strings.Split(src, "\n")
	if !ok || line < 1 || line > len(lines) {
		return err
	}
	call := scriptCall.FindStringSubmatch(lines[line-1])
	if call == nil {
		return err
	}
	return &ScriptACLError{Command: strings.ToUpper(call[1]), Line: line, Err: err}
}
