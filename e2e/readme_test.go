package e2e

// This file owns the test that keeps the README's examples true. It
// extracts every ```sh block that the line `<!-- test: single-broker -->`
// marks, runs the marked blocks in README order in one bash session (so a
// shell variable set in one block is there in the next, as in a reader's
// terminal) against one fresh broker, and compares each command's standard
// output with the `# →` lines written under it. The convention is described
// for writers in docs/contributing.md ("Runnable examples").
//
// Invariant: a marked block is run exactly as written, except that the
// default addresses of `make run` (Kafka 127.0.0.1:9092, HTTP
// 127.0.0.1:8080, etcd 127.0.0.1:2379) become the test broker's, in the
// commands and in the expected output alike.
// Invariant: every command of a marked block must exit 0; a command with
// `# →` lines must also print what they show (JSON compared as JSON), with
// `…` standing for a generated value.
// Invariant: a block using kcat or jq is skipped only when the tool is
// missing and CI is unset (requireCI); everything else runs.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	readmeMarkerPrefix = "<!-- test:"
	readmeWant         = "# →"
	readmeAny          = "…"
	readmeScriptLimit  = 3 * time.Minute // the whole README; a hung command fails well before the package timeout
)

// readmeEnvironments are the setups a marker may name.
var readmeEnvironments = map[string]bool{"single-broker": true}

// readmeTools are the external programs a block may use; a block naming one
// that is missing is skipped locally and fails in CI.
var readmeTools = []string{"kcat", "jq", "curl"}

type readmeCommand struct {
	line int      // README line of the command's first line
	text string   // as written, continuation lines included
	want []string // the `# →` lines under it, marker removed; nil: output not checked
}

type readmeBlock struct {
	line int    // README line of the opening fence
	env  string // what the marker names
	cmds []readmeCommand
}

// TestReadmeExamples runs the README's marked examples against a fresh
// broker. It fails when an example's command exits non-zero or prints
// something other than its `# →` lines.
func TestReadmeExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker and runs the README's examples")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		requireCI(t, "bash", err)
	}
	src, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatalf("read README: %v", err)
	}
	blocks, err := parseReadmeBlocks(string(src))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	if len(blocks) == 0 {
		t.Fatalf("README.md has no block marked %q; the examples would go untested", readmeMarkerPrefix+" single-broker -->")
	}
	for _, bl := range blocks {
		if !readmeEnvironments[bl.env] {
			t.Fatalf("README.md:%d: marker names %q; this test knows %v", bl.line, bl.env, sortedKeys(readmeEnvironments))
		}
	}

	skip := map[int]string{} // block line → why it is skipped
	for _, bl := range blocks {
		for _, tool := range readmeBlockTools(bl) {
			if _, err := exec.LookPath(tool); err != nil {
				if os.Getenv("CI") != "" {
					t.Fatalf("README.md:%d uses %s, which CI must have: %v", bl.line, tool, err)
				}
				skip[bl.line] = fmt.Sprintf("%s unavailable (%v); set CI=true to make this a failure", tool, err)
			}
		}
	}

	b := startBroker(t, brokerOptions{})
	rewrite := strings.NewReplacer(
		"127.0.0.1:9092", b.kafkaAddr, "localhost:9092", b.kafkaAddr,
		"127.0.0.1:8080", b.httpAddr, "localhost:8080", b.httpAddr,
		"127.0.0.1:2379", b.etcdClientAddr, "localhost:2379", b.etcdClientAddr,
	)

	dir := t.TempDir()
	outDir, workDir := filepath.Join(dir, "out"), filepath.Join(dir, "work")
	for _, d := range []string{outDir, workDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatalf("make %s: %v", d, err)
		}
	}
	script := readmeScript(blocks, skip, rewrite, outDir)
	scriptPath := filepath.Join(dir, "readme.sh")
	if err := os.WriteFile(scriptPath, []byte(script), 0o644); err != nil {
		t.Fatalf("write script: %v", err)
	}
	runErr := runReadmeScript(bash, scriptPath, workDir)

	stopped := false // a command failed: those after it did not run
	for bi, bl := range blocks {
		t.Run("README.md:"+strconv.Itoa(bl.line), func(t *testing.T) {
			if why, ok := skip[bl.line]; ok {
				t.Skip(why)
			}
			for ci, c := range bl.cmds {
				if stopped {
					t.Errorf("README.md:%d not run: an earlier command failed", c.line)
					return
				}
				id := readmeID(bi, ci)
				rc, err := os.ReadFile(filepath.Join(outDir, id+".rc"))
				if err != nil {
					stopped = true
					t.Errorf("README.md:%d never finished (script: %v)\n%s", c.line, runErr, rewrite.Replace(c.text))
					return
				}
				stdout, _ := os.ReadFile(filepath.Join(outDir, id+".out"))
				stderr, _ := os.ReadFile(filepath.Join(outDir, id+".err"))
				if code := strings.TrimSpace(string(rc)); code != "0" {
					stopped = true
					t.Errorf("README.md:%d exited %s:\n%s\nstdout:\n%s\nstderr:\n%s", c.line, code,
						rewrite.Replace(c.text), lastN(string(stdout), 2000), lastN(string(stderr), 2000))
					return
				}
				if c.want == nil {
					continue
				}
				want := rewrite.Replace(strings.Join(c.want, "\n"))
				if err := matchReadmeOutput(want, string(stdout)); err != nil {
					t.Errorf("README.md:%d: %v\ncommand:\n%s\ngot:\n%s\nwant (README):\n%s", c.line, err,
						rewrite.Replace(c.text), lastN(string(stdout), 2000), want)
				}
			}
		})
	}
	if runErr != nil && !stopped {
		t.Errorf("README script: %v", runErr)
	}
}

// parseReadmeBlocks returns the marked ```sh blocks of a README, split into
// commands. A marker must be followed by a ```sh fence; a `# →` line must
// follow a command.
func parseReadmeBlocks(src string) ([]readmeBlock, error) {
	lines := strings.Split(src, "\n")
	var blocks []readmeBlock
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, readmeMarkerPrefix) {
			continue
		}
		env := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(l, readmeMarkerPrefix), "-->"))
		if !strings.HasSuffix(l, "-->") || env == "" {
			return nil, fmt.Errorf("line %d: a marker reads %q", i+1, readmeMarkerPrefix+" single-broker -->")
		}
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j == len(lines) || strings.TrimSpace(lines[j]) != "```sh" {
			return nil, fmt.Errorf("line %d: the marker is not followed by a ```sh block", i+1)
		}
		end := j + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("line %d: the block is not closed", j+1)
		}
		cmds, err := splitReadmeCommands(lines[j+1:end], j+2)
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, readmeBlock{line: j + 1, env: env, cmds: cmds})
		i = end
	}
	return blocks, nil
}

// splitReadmeCommands cuts a block's lines into commands: a command goes on
// while a quote is open or its line ends in `\`, `|`, `&&` or `||`.
// Comment lines between commands are dropped, except `# →` lines, which
// belong to the command above them.
func splitReadmeCommands(lines []string, firstLine int) ([]readmeCommand, error) {
	var cmds []readmeCommand
	var cur *readmeCommand
	open := false // the current command goes on to the next line
	var q quoteState
	for k, l := range lines {
		n := firstLine + k
		if open {
			cur.text += "\n" + l
			open = q.scan(l)
			continue
		}
		trimmed := strings.TrimSpace(l)
		switch {
		case trimmed == "":
			continue
		case strings.HasPrefix(trimmed, readmeWant):
			if len(cmds) == 0 {
				return nil, fmt.Errorf("line %d: %q with no command above it", n, readmeWant)
			}
			last := &cmds[len(cmds)-1]
			last.want = append(last.want, strings.TrimSpace(strings.TrimPrefix(trimmed, readmeWant)))
			continue
		case strings.HasPrefix(trimmed, "#"):
			continue
		}
		cmds = append(cmds, readmeCommand{line: n, text: l})
		cur = &cmds[len(cmds)-1]
		q = quoteState{}
		open = q.scan(l)
	}
	if open {
		return nil, fmt.Errorf("line %d: the block ends inside a command (an open quote or a trailing \\)", firstLine+len(lines)-1)
	}
	return cmds, nil
}

// quoteState follows shell quoting across the lines of one command, well
// enough for README examples: single and double quotes, backslash escapes
// and comments.
type quoteState struct{ single, double bool }

// scan reads one line and reports whether the command continues on the
// next one.
func (q *quoteState) scan(l string) bool {
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case q.single:
			q.single = c != '\''
		case c == '\\':
			i++ // the escaped character, or the line's end
		case q.double:
			q.double = c != '"'
		case c == '\'':
			q.single = true
		case c == '"':
			q.double = true
		case c == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
			l = l[:i] // the rest of the line is a comment
		}
	}
	if q.single || q.double {
		return true
	}
	t := strings.TrimRight(l, " \t")
	return strings.HasSuffix(t, "\\") || strings.HasSuffix(t, "|") || strings.HasSuffix(t, "&&")
}

// readmeBlockTools lists the readmeTools a block's commands name.
func readmeBlockTools(bl readmeBlock) []string {
	var out []string
	for _, tool := range readmeTools {
		re := regexp.MustCompile(`(^|[\s|;&(])` + tool + `(\s|$)`)
		for _, c := range bl.cmds {
			if re.MatchString(c.text) {
				out = append(out, tool)
				break
			}
		}
	}
	return out
}

func readmeID(block, cmd int) string { return fmt.Sprintf("b%02d-c%02d", block, cmd) }

// readmeScript writes the bash script: each command in a brace group (so
// its assignments stay in the session) with its output in outDir, its exit
// status after it, and a stop at the first failure.
func readmeScript(blocks []readmeBlock, skip map[int]string, rewrite *strings.Replacer, outDir string) string {
	var s strings.Builder
	s.WriteString("set -o pipefail\n")
	for bi, bl := range blocks {
		if _, ok := skip[bl.line]; ok {
			continue
		}
		for ci, c := range bl.cmds {
			p := filepath.Join(outDir, readmeID(bi, ci)) // a temp dir: no quote in it
			fmt.Fprintf(&s, "# README.md:%d\n{\n%s\n} >'%s.out' 2>'%s.err'\nrc=$?\necho $rc >'%s.rc'\n[ $rc -eq 0 ] || exit 0\n",
				c.line, rewrite.Replace(c.text), p, p, p)
		}
	}
	return s.String()
}

// runReadmeScript runs the script in its own process group, which is killed
// whole if it outlives readmeScriptLimit (kcat and curl children included).
func runReadmeScript(bash, script, workDir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), readmeScriptLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, script)
	cmd.Dir = workDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("bash %s: %w (deadline %v)\n%s", script, err, readmeScriptLimit, lastN(out.String(), 2000))
	}
	return nil
}

// matchReadmeOutput compares what a command printed with its `# →` lines.
// JSON (want starting with { or [) is compared as values; anything else
// line by line. `…` matches any run of characters within a line or JSON
// string; a bare `…` in JSON matches any value, and a `"…"` key allows
// keys the README does not show.
func matchReadmeOutput(want, got string) error {
	want, got = strings.TrimSpace(want), strings.TrimSpace(got)
	if strings.HasPrefix(want, "{") || strings.HasPrefix(want, "[") {
		var w, g any
		if err := json.Unmarshal([]byte(quoteBareAny(want)), &w); err != nil {
			return fmt.Errorf("the README's expected JSON does not parse: %w", err)
		}
		if err := json.Unmarshal([]byte(got), &g); err != nil {
			return fmt.Errorf("output is not one JSON value: %w", err)
		}
		return matchJSON("$", w, g)
	}
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	if len(wl) != len(gl) {
		return fmt.Errorf("%d lines, want %d", len(gl), len(wl))
	}
	for i := range wl {
		if !globMatch(strings.TrimSpace(wl[i]), strings.TrimRight(gl[i], " \t\r")) {
			return fmt.Errorf("line %d is %q, want %q", i+1, gl[i], wl[i])
		}
	}
	return nil
}

// quoteBareAny turns each `…` outside a JSON string into the string "…".
func quoteBareAny(s string) string {
	var b strings.Builder
	inString := false
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case inString && c == '\\' && i+1 < len(s):
			b.WriteString(s[i : i+2])
			i += 2
			continue
		case c == '"':
			inString = !inString
		case !inString && strings.HasPrefix(s[i:], readmeAny):
			b.WriteString(`"` + readmeAny + `"`)
			i += len(readmeAny)
			continue
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}

func matchJSON(path string, want, got any) error {
	if ws, ok := want.(string); ok && ws == readmeAny {
		return nil
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s is %s, want an object", path, jsonText(got))
		}
		_, open := w[readmeAny]
		for k, wv := range w {
			if k == readmeAny {
				continue
			}
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s has no %q", path, k)
			}
			if err := matchJSON(path+"."+k, wv, gv); err != nil {
				return err
			}
		}
		if !open {
			for k := range g {
				if _, ok := w[k]; !ok {
					return fmt.Errorf("%s has %q, which the README does not show (add it, or a \"…\" key)", path, k)
				}
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s is %s, want %s", path, jsonText(got), jsonText(want))
		}
		for i := range w {
			if err := matchJSON(fmt.Sprintf("%s[%d]", path, i), w[i], g[i]); err != nil {
				return err
			}
		}
		return nil
	case string:
		if g, ok := got.(string); ok && globMatch(w, g) {
			return nil
		}
	default:
		if fmt.Sprint(want) == fmt.Sprint(got) && fmt.Sprintf("%T", want) == fmt.Sprintf("%T", got) {
			return nil
		}
	}
	return fmt.Errorf("%s is %s, want %s", path, jsonText(got), jsonText(want))
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// globMatch reports whether s is pattern with each `…` replaced by any run
// of characters.
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, readmeAny)
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	last := parts[len(parts)-1]
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestReadmeExampleConvention checks the parts of the convention that need
// no broker: how blocks are found and cut into commands, and how output is
// matched.
func TestReadmeExampleConvention(t *testing.T) {
	readme := strings.Join([]string{
		"text",
		"```sh",
		"not marked",
		"```",
		"<!-- test: single-broker -->",
		"```sh",
		"curl -s -XPOST 127.0.0.1:8080/v1/x -d '{\"a\":[",
		"  1]}'",
		"# → {\"id\":\"…\",\"n\":…}",
		"# a comment",
		"kcat -C -b 127.0.0.1:9092 \\",
		"  -t t -e | sort",
		"# → a",
		"# → b …",
		"x=$(jq -r .a <<<'{\"a\": \"# not a comment\"}')",
		"```",
	}, "\n")
	blocks, err := parseReadmeBlocks(readme)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if len(blocks) != 1 || blocks[0].line != 6 || blocks[0].env != "single-broker" {
		t.Fatalf("blocks = %+v, want one single-broker block at line 6", blocks)
	}
	cmds := blocks[0].cmds
	wantLines, wantChecked := []int{7, 11, 15}, []int{1, 2, 0}
	if len(cmds) != len(wantLines) {
		t.Fatalf("commands = %+v, want %d", cmds, len(wantLines))
	}
	for i, c := range cmds {
		if c.line != wantLines[i] || len(c.want) != wantChecked[i] {
			t.Errorf("command %d = line %d with %d output lines, want line %d with %d", i, c.line, len(c.want), wantLines[i], wantChecked[i])
		}
	}
	if got := readmeBlockTools(blocks[0]); strings.Join(got, ",") != "kcat,jq,curl" {
		t.Errorf("tools = %v, want kcat, jq and curl", got)
	}

	for _, bad := range []string{
		"<!-- test: single-broker -->\ntext\n```sh\ntrue\n```",
		"<!-- test: single-broker -->\n```sh\n# → out\n```",
		"<!-- test: single-broker -->\n```sh\necho 'open\n```",
		"<!-- test: single-broker -->\n```sh\ntrue\n",
	} {
		if _, err := parseReadmeBlocks(bad); err == nil {
			t.Errorf("parse accepted %q", bad)
		}
	}

	for _, tc := range []struct {
		want, got string
		ok        bool
	}{
		{`{"a":1,"b":[1,2]}`, "{\n  \"b\": [1, 2],\n  \"a\": 1\n}\n", true},
		{`{"a":1}`, `{"a":2}`, false},
		{`{"a":1}`, `{"a":1,"b":2}`, false},
		{`{"a":1,"…":…}`, `{"a":1,"b":2}`, true},
		{`{"id":"sluice-…","t":…}`, `{"id":"sluice-http-9","t":1796182741156}`, true},
		{`{"id":"sluice-…"}`, `{"id":"other"}`, false},
		{`{"n":1}`, `{"n":"1"}`, false},
		{`[1,2]`, `[1,2,3]`, false},
		{`{"a":1}`, `not json`, false},
		{"k1=hello @0\nk2=world @1", "k1=hello @0\nk2=world @1\n", true},
		{"k1=… @0", "k1=anything at all @0", true},
		{"k1=hello @0", "k1=hello @0\nk2=world @1", false},
		{"k1=hello @1", "k1=hello @0", false},
	} {
		if err := matchReadmeOutput(tc.want, tc.got); (err == nil) != tc.ok {
			t.Errorf("match(%q, %q) = %v, want ok=%v", tc.want, tc.got, err, tc.ok)
		}
	}
}
