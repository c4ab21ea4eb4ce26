package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Do sends one command to addr on a new connection and returns its reply:
// a simple or bulk string as is, an integer in decimal, a nil bulk string
// as "", an array as its elements joined with "\n". An error reply is
// returned as an error with the server's text. It blocks at most
// timeout. It is meant for setting a test server up (CONFIG SET, CLUSTER
// MEET, …), not for the code under test, which has its own client.
func Do(addr string, timeout time.Duration, args ...string) (string, error) {
	return do(tcpDial, addr, timeout, args...)
}

func do(dial dialFunc, addr string, timeout time.Duration, args ...string) (string, error) {
	replies, err := doAll(dial, addr, timeout, args)
	if err != nil {
		return "", err
	}
	return replies[0], nil
}

// doAll sends cmds in order on one new connection and returns their
// replies (see Do); the first error reply ends it. Blocks at most timeout.
func doAll(dial dialFunc, addr string, timeout time.Duration, cmds ...[]string) ([]string, error) {
	c, err := dial(addr, timeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	var b strings.Builder
	for _, args := range cmds {
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	var out []string
	for _, args := range cmds {
		reply, err := readReply(r, args[0])
		if err != nil {
			return out, err
		}
		out = append(out, reply)
	}
	return out, nil
}

// readReply reads one reply (see Do); an array's elements, read
// recursively, are joined with "\n".
func readReply(r *bufio.Reader, cmd string) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("redistest: empty reply")
	}
	switch body := line[1:]; line[0] {
	case '+', ':':
		return body, nil
	case '-':
		return "", fmt.Errorf("redistest: %s: %s", cmd, body)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return "", err // "$-1": nil bulk string
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return "", err // "*-1": nil array
		}
		parts := make([]string, n)
		for i := range parts {
			if parts[i], err = readReply(r, cmd); err != nil {
				return "", err
			}
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("redistest: %s: unsupported reply %q", cmd, line)
}

// Do sends one command to the server (see the package function Do, 5 s
// timeout) and fails the test on an error.
func (s *Server) Do(args ...string) string {
	s.t.Helper()
	v, err := do(s.dial, s.Addr(), 5*time.Second, args...)
	if err != nil {
		s.t.Fatalf("redistest: %s: %v", s.Addr(), err)
	}
	return v
}

// Clients returns how many client connections the server has (CLIENT
// LIST), the one that asks excluded; it fails the test on an error.
func (s *Server) Clients() int {
	s.t.Helper()
	return strings.Count(strings.TrimSpace(s.Do("CLIENT", "LIST")), "\n") // n lines, one of them the asker's
}
