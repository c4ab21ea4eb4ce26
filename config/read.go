package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/spf13/viper"
)

// Phase 1, read: the file's bytes (at most maxFileBytes) to a raw tree of
// maps, lists and scalars, in the file's own key case, with the input
// guards of limits.go, tomlscan.go and yamlvalue.go (size, nesting depth,
// UTF-8, duplicate keys) applied before any decoder sees the bytes.

// readLimited reads at most maxFileBytes+1 bytes of path, so that a huge
// file (or /dev/zero) is never read whole. size is the file's size: its
// length when it was read whole, else its stat size (at least what was read).
func readLimited(path string) (data []byte, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	data, err = io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	size = int64(len(data))
	if fi, serr := f.Stat(); serr == nil && size > maxFileBytes && fi.Mode().IsRegular() {
		size = max(size, fi.Size())
	}
	return data, size, err
}

// decodeRaw parses data with viper's codec for format (yaml.v3 directly
// for YAML, so that its node tree can be measured first), keeping key case
// (viper itself lower-cases every key, which would corrupt job env names).
// Size and nesting depth are checked before decoding (limits.go); invalid
// UTF-8 is rejected in every format (with its byte offset); an empty or
// blank file is an empty config in every format.
func decodeRaw(data []byte, format string) (map[string]any, error) {
	dec, err := viper.NewCodecRegistry().Decoder(format)
	if err != nil || !slices.Contains([]string{"yaml", "yml", "toml", "json"}, format) {
		return nil, fmt.Errorf("unsupported config format %q; use yaml, toml or json", format)
	}
	if len(data) > maxFileBytes {
		return nil, inputError(tooLarge(int64(len(data))))
	}
	if !utf8.Valid(data) {
		off := invalidUTF8(data)
		line, col := lineCol(data, off)
		return nil, fmt.Errorf("invalid UTF-8 at byte offset %d (line %d, column %d); save the file as UTF-8", off, line, col)
	}
	raw := map[string]any{}
	if len(bytes.TrimSpace(data)) == 0 {
		return raw, nil
	}
	switch format {
	case "yaml", "yml":
		raw, err = decodeYAML(data)
	case "toml":
		if line := tomlTooDeep(data); line > 0 {
			return nil, inputError(tooDeep(line))
		}
		err = dec.Decode(data, raw)
	case "json":
		if err = checkJSON(data); err == nil {
			err = dec.Decode(data, raw)
		}
	}
	if err != nil {
		return nil, syntaxError(data, format, err)
	}
	return raw, nil
}

// syntaxError renders a parser error once, with its position: line:column
// for JSON (from the byte offset) and TOML, the parser's own line for YAML.
func syntaxError(data []byte, format string, err error) error {
	name := strings.ToUpper(format)
	if name == "YML" {
		name = "YAML"
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var pe interface{ Position() (row, column int) } // go-toml/v2's DecodeError
	var le inputError
	switch {
	case errors.As(err, &le):
		return le
	case errors.As(err, &pe):
		row, col := pe.Position()
		return fmt.Errorf("invalid %s at line %d, column %d: %s", name, row, col, strings.TrimPrefix(oneLine(err.Error()), "toml: "))
	case errors.As(err, &se):
		line, col := lineCol(data, int(se.Offset)-1) // Offset is just past the bad byte
		return fmt.Errorf("invalid JSON at line %d, column %d: %s", line, col, se.Error())
	case errors.As(err, &te):
		line, col := lineCol(data, int(te.Offset)-1)
		return fmt.Errorf("invalid JSON at line %d, column %d: want an object of settings, got a JSON %s", line, col, te.Value)
	}
	msg := oneLine(err.Error())
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = strings.TrimPrefix(msg, "toml: ")
	if name == "YAML" {
		msg += quoteHint(data, msg)
	}
	return fmt.Errorf("invalid %s: %s", name, msg)
}

// invalidUTF8 returns the byte offset of the first invalid UTF-8 sequence.
func invalidUTF8(data []byte) int {
	for off := 0; off < len(data); {
		r, n := utf8.DecodeRune(data[off:])
		if r == utf8.RuneError && n <= 1 {
			return off
		}
		off += n
	}
	return len(data)
}

// lineCol returns the 1-based line and column (in bytes) of offset off,
// clamped to data.
func lineCol(data []byte, off int) (line, col int) {
	off = min(max(off, 0), len(data))
	line = 1 + bytes.Count(data[:off], []byte("\n"))
	return line, off - bytes.LastIndexByte(data[:off], '\n')
}

// oneLine folds a multi-line parser message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
