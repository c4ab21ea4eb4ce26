package config

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"
)

// NodeIDFile is the file in node.state_dir that keeps a node id the daemon
// created (on a machine without /etc/machine-id, such as most containers).
const NodeIDFile = "node-id"

// Where Node.ID came from (Node.IDSource).
const (
	// IDConfigured: node.id was set (file, environment or flag).
	IDConfigured = "configured"
	// IDMachine: "<hostname>-<8 hex>" with the hex from /etc/machine-id
	// (Options.MachineID) and node.state_dir.
	IDMachine = "machine-id"
	// IDStateDir: read from node.state_dir/node-id, which the daemon wrote
	// at an earlier start.
	IDStateDir = "state-dir"
	// IDNew: "<hostname>-<8 random hex>", because there is neither a
	// machine id nor a node-id file; the daemon writes it to
	// node.state_dir/node-id at start (then it is IDStateDir).
	IDNew = "new"
)

// maxNodeIDLen bounds a node id read from the state directory.
const maxNodeIDLen = 256

// IDOrigin describes Node.IDSource for people, e.g. "from /etc/machine-id
// and node.state_dir".
func (n Node) IDOrigin() string {
	switch n.IDSource {
	case IDConfigured:
		switch {
		case n.IDSetBy == "flag":
			return "set by a command-line flag (node.id)"
		case n.IDSetBy != "":
			return "set by the environment variable " + n.IDSetBy
		}
		return "set by node.id in the config file"
	case IDMachine:
		return "default: hostname + hash of /etc/machine-id and node.state_dir"
	case IDStateDir:
		return "default: kept in " + filepath.Join(n.StateDir, NodeIDFile)
	}
	return "default: new; there is no /etc/machine-id, and the daemon keeps it in " +
		filepath.Join(n.StateDir, NodeIDFile) + " at its first start"
}

// resolveNodeID fills Node.ID and Node.IDSource after node.state_dir is
// resolved: the configured id; else, with a machine id, "<hostname>-<8
// hex>" where the hex is an HMAC-SHA256 keyed with the machine id (a fixed
// application key and the state directory as the message, so two daemons
// on one machine — each with its own state directory — differ, and the
// machine id itself is never exposed, as machine-id(5) asks; the directory
// is hashed as canonicalDir spells it); else the id in
// node.state_dir/node-id; else a new random one. A node-id file that
// cannot be read or holds no valid id is reported at node.state_dir (an
// error, or a warning for ForValidate, where another user may run the
// command).
func resolveNodeID(n *Node, p *problems, opts Options, path func(string) string) {
	if n.ID != "" {
		n.IDSource = IDConfigured
		return
	}
	host := opts.Hostname
	if host == "" {
		host = "cronlock"
	}
	if mid := machineID(opts.MachineID); mid != "" {
		mac := hmac.New(sha256.New, []byte(mid))
		mac.Write([]byte("cronlock node id\x00" + canonicalDir(n.StateDir)))
		n.ID, n.IDSource = host+"-"+hex.EncodeToString(mac.Sum(nil)[:4]), IDMachine
		return
	}
	file := filepath.Join(n.StateDir, NodeIDFile)
	id, err := readNodeID(file)
	switch {
	case err == nil:
		n.ID, n.IDSource = id, IDStateDir
		return
	case !errors.Is(err, fs.ErrNotExist):
		msg := fmt.Sprintf("%v; the node's id is kept there: make it readable for the daemon's user, delete it "+
			"(a new id is made), or set node.id", err)
		if opts.Purpose == ForValidate {
			p.warn(path("node.state_dir"), msg+" (node.id shown here is not the daemon's)")
		} else {
			p.errMsg(path("node.state_dir"), msg)
		}
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	n.ID, n.IDSource = host+"-"+hex.EncodeToString(b[:]), IDNew
}

// canonicalDir is the state directory as the node id hashes it, so that
// every spelling of one directory gives one id: dir cleaned (no trailing
// slash, "." or ".." components) and, when it exists, with its symbolic
// links resolved. A directory that does not exist (yet, or not on this
// machine, as at -validate elsewhere) is only cleaned. A canonical
// spelling is unchanged, so its id is the same as before this was done.
func canonicalDir(dir string) string {
	dir = filepath.Clean(dir)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		return real
	}
	return dir
}

// machineID returns the machine id in content (of /etc/machine-id: 32
// lowercase hex digits and a newline, machine-id(5)), or "" when content
// is not one (missing, empty, or "uninitialized" during early boot).
func machineID(content string) string {
	s := strings.TrimSpace(content)
	if len(s) != 32 {
		return ""
	}
	if _, err := hex.DecodeString(s); err != nil || strings.ToLower(s) != s {
		return ""
	}
	return s
}

// readNodeID reads a node id kept in file: one line of printable
// characters without spaces.
func readNodeID(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	id := strings.TrimSuffix(string(data), "\n")
	if err := checkNodeID(id); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	return id, nil
}

// checkNodeID checks a node id kept in a file.
func checkNodeID(id string) error {
	if id == "" || len(id) > maxNodeIDLen {
		return fmt.Errorf("holds no node id (want one line of 1..%d characters)", maxNodeIDLen)
	}
	for _, r := range id {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("node id %q has a space or an unprintable character", id)
		}
	}
	return nil
}

// KeepNodeID writes a new node id (Node.IDSource IDNew) to
// node.state_dir/node-id with write (package statedir's Dir.WriteFile: atomic and
// durable), so that the next start, and every reload, finds it; the
// source becomes IDStateDir. It does nothing for other sources and
// returns write's error.
func KeepNodeID(n *Node, write func(name string, data []byte) error) error {
	if n.IDSource != IDNew {
		return nil
	}
	if err := write(NodeIDFile, []byte(n.ID+"\n")); err != nil {
		return fmt.Errorf("keep the node id: %w", err)
	}
	n.IDSource = IDStateDir
	return nil
}
