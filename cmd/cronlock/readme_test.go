package main

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The README test keeps README.md a manual that holds (issue 33): its
// annotated example configuration validates, it stays short, its table of
// contents resolves, and no relative link in it or in docs/ points at a file
// that does not exist.

const (
	repoRoot      = "../.."
	readmeMaxLine = 500
	// exampleMarker is the HTML comment right before the ```yaml fence of the
	// README's annotated example configuration.
	exampleMarker = "<!-- example-config -->"
)

func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// exampleConfig returns the YAML block that follows exampleMarker.
func exampleConfig(t *testing.T, readme string) string {
	t.Helper()
	if n := strings.Count(readme, exampleMarker); n != 1 {
		t.Fatalf("README.md has %d %q markers, want 1 (right before the example's ```yaml fence)", n, exampleMarker)
	}
	after := readme[strings.Index(readme, exampleMarker)+len(exampleMarker):]
	after = strings.TrimLeft(after, "\n")
	if !strings.HasPrefix(after, "```yaml\n") {
		t.Fatalf("the line after %q is %q, want ```yaml", exampleMarker, strings.SplitN(after, "\n", 2)[0])
	}
	body := after[len("```yaml\n"):]
	end := strings.Index(body, "\n```")
	if end < 0 {
		t.Fatal("the example configuration's ```yaml block is not closed")
	}
	return body[:end+1]
}

// TestReadme_ExampleConfigValidates runs `cronlock -validate -json` on the
// README's annotated example. Errors fail; warnings are allowed only when
// they depend on the host (a user, directory or file that exists only on the
// servers, or a user while the test is not root: "the daemon will refuse to
// start"), as they would in CI.
func TestReadme_ExampleConfigValidates(t *testing.T) {
	cfg := exampleConfig(t, readRepoFile(t, "README.md"))
	path := filepath.Join(t.TempDir(), "cronlock.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, nil, "-validate", "-json", "-config", path)
	var got struct {
		Valid    bool `json:"valid"`
		Problems []struct {
			Path, Severity, Message string
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("-validate -json: %v; stdout %q, stderr %q", err, out, errOut)
	}
	if code != 0 || !got.Valid {
		t.Errorf("the README's example config: exit %d, valid %v; want 0, true", code, got.Valid)
	}
	for _, p := range got.Problems {
		switch {
		case p.Severity == "notice":
		case p.Severity == "warning" && strings.HasSuffix(p.Message, "the daemon will refuse to start"):
			t.Logf("host-dependent warning (allowed): %s: %s", p.Path, p.Message)
		default:
			t.Errorf("the README's example config: %s: %s: %s", p.Severity, p.Path, p.Message)
		}
	}
	if !strings.Contains(cfg, "\njobs:\n") || strings.Count(cfg, "\n  - name: ") < 3 {
		t.Errorf("the example config has fewer than 3 jobs:\n%s", cfg)
	}
}

// TestReadme_ShortWithContents checks the README's length and that its
// Contents section links every section after it, by an anchor that exists.
func TestReadme_ShortWithContents(t *testing.T) {
	readme := readRepoFile(t, "README.md")
	if n := strings.Count(readme, "\n"); n > readmeMaxLine {
		t.Errorf("README.md has %d lines, want at most %d: move detail to docs/", n, readmeMaxLine)
	}
	anchors := headingAnchors(readme)
	lines := strings.Split(readme, "\n")
	start := -1
	for i, l := range lines {
		if l == "## Contents" {
			start = i
		}
	}
	if start < 0 {
		t.Fatal(`README.md has no "## Contents" section`)
	}
	var listed []string
	var sections []string
	inContents := true
	for _, nl := range outsideCode(lines[start+1:]) {
		l := nl.text
		if strings.HasPrefix(l, "## ") {
			inContents = false
			sections = append(sections, slug(strings.TrimPrefix(l, "## ")))
		}
		if inContents {
			for _, m := range linkRE.FindAllStringSubmatch(stripInlineCode(l), -1) {
				listed = append(listed, m[1])
			}
		}
	}
	if len(listed) == 0 {
		t.Fatal("the Contents section has no links")
	}
	seen := map[string]bool{}
	for _, link := range listed {
		anchor, ok := strings.CutPrefix(link, "#")
		switch {
		case !ok:
			t.Errorf("Contents links %q, want an anchor in README.md (#…)", link)
		case !anchors[anchor]:
			t.Errorf("Contents links %q, but README.md has no such heading", link)
		}
		seen[anchor] = true
	}
	for _, s := range sections {
		if !seen[s] {
			t.Errorf("the section #%s is not in Contents", s)
		}
	}
}

// TestReadme_RelativeLinksResolve checks every relative link of README.md
// and of the Markdown files under docs/: the file (or directory) exists, and
// an anchor into a Markdown file names one of its headings.
func TestReadme_RelativeLinksResolve(t *testing.T) {
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(repoRoot, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	anchorsOf := map[string]map[string]bool{}
	anchors := func(rel string) map[string]bool {
		if a, ok := anchorsOf[rel]; ok {
			return a
		}
		a := headingAnchors(readRepoFile(t, rel))
		anchorsOf[rel] = a
		return a
	}
	checked := 0
	for _, src := range files {
		text := readRepoFile(t, src)
		for _, nl := range outsideCode(strings.Split(text, "\n")) {
			for _, m := range linkRE.FindAllStringSubmatch(stripInlineCode(nl.text), -1) {
				target := m[1]
				if u, err := url.Parse(target); err != nil || u.Scheme != "" || strings.HasPrefix(target, "//") {
					continue // absolute URLs (https:, mailto:) are not checked
				}
				checked++
				where := src + ":" + strconv.Itoa(nl.n)
				file, anchor, _ := strings.Cut(target, "#")
				rel := src
				if file != "" {
					unescaped, err := url.PathUnescape(file)
					if err != nil {
						t.Errorf("%s: link %q: %v", where, target, err)
						continue
					}
					rel = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(src), unescaped)))
					if strings.HasPrefix(rel, "../") || filepath.IsAbs(unescaped) {
						t.Errorf("%s: link %q leaves the repository; cite files in it only", where, target)
						continue
					}
					if _, err := os.Stat(filepath.Join(repoRoot, rel)); err != nil {
						t.Errorf("%s: link %q: %s does not exist", where, target, rel)
						continue
					}
				}
				if anchor == "" || !strings.HasSuffix(rel, ".md") {
					continue
				}
				if !anchors(rel)[anchor] {
					t.Errorf("%s: link %q: %s has no heading with the anchor #%s", where, target, rel, anchor)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: the link pattern is broken")
	}
}

// linkRE matches an inline Markdown link or image, [text](target) or
// [text](target "title"), capturing the target.
var linkRE = regexp.MustCompile(`\]\(<?([^)\s>]+)>?(?:\s+"[^"]*")?\)`)

var inlineCodeRE = regexp.MustCompile("`[^`]*`")

// stripInlineCode removes code spans, whose brackets are not links.
func stripInlineCode(line string) string { return inlineCodeRE.ReplaceAllString(line, "") }

// numberedLine is a line of a Markdown file and its 1-based number.
type numberedLine struct {
	n    int
	text string
}

// outsideCode returns, in order, the lines that are not inside code blocks
// (fenced, or indented by four spaces outside a list or table).
func outsideCode(lines []string) []numberedLine {
	var out []numberedLine
	fence := ""
	for i, l := range lines {
		trimmed := strings.TrimSpace(l)
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
		case strings.HasPrefix(trimmed, "```"), strings.HasPrefix(trimmed, "~~~"):
			fence = trimmed[:3]
		case strings.HasPrefix(l, "    ") && !strings.HasPrefix(trimmed, "-") && !strings.HasPrefix(trimmed, "|"):
		default:
			out = append(out, numberedLine{i + 1, l})
		}
	}
	return out
}

// htmlAnchorRE matches an HTML anchor, <a id="x"> or <a name="x">.
var htmlAnchorRE = regexp.MustCompile(`<a (?:id|name)="([^"]+)"`)

// headingAnchors returns the anchors GitHub gives the ATX headings of a
// Markdown text (lower case, punctuation dropped, spaces made hyphens, and
// -1, -2, … appended to repeats) and its HTML anchors.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	count := map[string]int{}
	for _, nl := range outsideCode(strings.Split(text, "\n")) {
		l := nl.text
		for _, m := range htmlAnchorRE.FindAllStringSubmatch(l, -1) {
			anchors[m[1]] = true
		}
		level := len(l) - len(strings.TrimLeft(l, "#"))
		if level < 1 || level > 6 || !strings.HasPrefix(l[level:], " ") {
			continue
		}
		s := slug(strings.TrimSpace(l[level:]))
		if n := count[s]; n > 0 {
			anchors[s+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[s] = true
		}
		count[s]++
	}
	return anchors
}

var headingLinkRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// slug is GitHub's anchor of a heading's text.
func slug(heading string) string {
	heading = headingLinkRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}
