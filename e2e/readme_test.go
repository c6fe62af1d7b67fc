package e2e

// This file owns the test that keeps the README's examples true. Every
// ```sh block of the README carries a marker on the line above it:
//
//	<!-- test: single-broker -->           run against one broker as `make run` starts it
//	<!-- test: s3-broker -->               the same, with Versity's S3 gateway as its object store (s3test)
//	<!-- test: secure-broker -->           run in a second session, which starts its own broker with `sluiced`
//	<!-- test: skip: <why> -->              not run; the test counts and reports it
//
// and a runnable marker may add `; replace: OLD => NEW` to run the block
// with OLD replaced (a benchmark's duration cut short). A ```sh block
// without a marker fails the test: no example goes untested unnoticed.
// The blocks of one environment run in README order in one bash session
// (so a shell variable set in one block is there in the next, as in a
// reader's terminal), in a fresh working directory, and each command's
// standard output is compared with the `# →` lines written under it. The
// convention is described for writers in docs/contributing.md ("Runnable
// examples").
//
// Invariant: a runnable block is run exactly as written, except for its
// marker's replacements and the default addresses of `make run` (Kafka
// 127.0.0.1:9092, HTTP 127.0.0.1:8080, inter-broker 127.0.0.1:9093, etcd
// 127.0.0.1:2379), which become the session's broker's, in the commands
// and in the expected output alike. `sluiced`, `sluicectl`, `tierctl` and
// `loadgen` are on PATH and in ./bin; SLUICE_SERVER names the broker for
// sluicectl.
// Invariant: a secure-broker session has exactly one `sluiced` command
// line, which starts its broker: it runs in the background with the
// session's ports and data directory put before its own flags, the session
// waits for its /readyz, and the broker must exit 0 on SIGTERM at the end.
// Invariant: every command of a runnable block must exit 0; a command with
// `# →` lines must also print what they show (JSON compared as JSON), with
// `…` standing for a generated value.
// Invariant: a block using kcat or jq is skipped only when the tool is
// missing and CI is unset (requireCI); everything else marked runnable runs.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/tier/objstore/s3test"
)

const (
	readmeMarkerPrefix = "<!-- test:"
	readmeReplace      = "replace:"
	readmeWant         = "# →"
	readmeAny          = "…"
	readmeScriptLimit  = 3 * time.Minute // each session; a hung command fails well before the package timeout

	readmeSingle = "single-broker"
	readmeS3     = "s3-broker"
	readmeSecure = "secure-broker"
	readmeSkip   = "skip"
)

// readmeEnvironments are the setups a marker may name, in the order their
// sessions run.
var readmeEnvironments = []string{readmeSingle, readmeS3, readmeSecure}

// readmeTools are the external programs a block may use; a block naming one
// that is missing is skipped locally and fails in CI.
var readmeTools = []string{"kcat", "jq", "curl"}

// readmeBinaries are the project's programs the examples call, on PATH and
// in ./bin of the working directory.
var readmeBinaries = []string{"sluicectl", "tierctl", "loadgen"}

type readmeCommand struct {
	line int      // README line of the command's first line
	text string   // as written, continuation lines included
	want []string // the `# →` lines under it, marker removed; nil: output not checked
}

type readmeBlock struct {
	line    int         // README line of the opening fence
	env     string      // what the marker names
	why     string      // env skip: the marker's reason
	replace [][2]string // the marker's replacements, old and new
	cmds    []readmeCommand
}

// TestReadmeExamples runs the README's shell examples against fresh
// brokers. It fails when a ```sh block has no marker, when an example's
// command exits non-zero or prints something other than its `# →` lines,
// and when a broker an example started does not stop cleanly.
func TestReadmeExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("starts brokers and runs the README's examples")
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
	counts := map[string]int{}
	for _, bl := range blocks {
		counts[bl.env]++
	}
	if counts[readmeSingle] == 0 {
		t.Fatalf("README.md has no block marked %q; the examples would go untested", readmeMarkerPrefix+" single-broker -->")
	}

	skip := map[int]string{} // block line → why it is skipped
	for _, bl := range blocks {
		if bl.env == readmeSkip {
			skip[bl.line] = "marked skip: " + bl.why
			continue
		}
		for _, tool := range readmeBlockTools(bl) {
			if _, err := exec.LookPath(tool); err != nil {
				if os.Getenv("CI") != "" {
					t.Fatalf("README.md:%d uses %s, which CI must have: %v", bl.line, tool, err)
				}
				skip[bl.line] = fmt.Sprintf("%s unavailable (%v); set CI=true to make this a failure", tool, err)
			}
		}
	}

	// A session's blocks run in order and may use what the ones before
	// them made: after a block skipped for a missing tool, the rest of its
	// session is skipped too. A session whose broker-starting block is
	// skipped is skipped whole: its other blocks need that broker.
	toolSkipped := map[string]int{} // session → the line of its first block skipped for a tool
	for _, bl := range blocks {
		why, ok := skip[bl.line]
		if first, after := toolSkipped[bl.env]; after && !ok {
			skip[bl.line] = fmt.Sprintf("follows README.md:%d in its session, which is skipped: %s", first, skip[first])
		} else if ok && !after && bl.env != readmeSkip && !strings.HasPrefix(why, "marked skip") {
			toolSkipped[bl.env] = bl.line
		}
	}
	for _, bl := range blocks {
		why, skipped := skip[bl.line]
		if !skipped || bl.env == readmeSingle || bl.env == readmeS3 || !readmeStartsBroker(bl) {
			continue
		}
		for _, other := range blocks {
			if _, ok := skip[other.line]; !ok && other.env == bl.env {
				skip[other.line] = fmt.Sprintf("its session's broker starts in README.md:%d, which is skipped: %s", bl.line, why)
			}
		}
		counts[bl.env] = 0
	}

	dir := t.TempDir()
	outDir := filepath.Join(dir, "out")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatalf("make %s: %v", outDir, err)
	}
	binDir := readmeBinDir(t, filepath.Join(dir, "bin"))

	stopped := map[string]bool{} // session → a command failed: those after it did not run
	rewrites := map[string]*strings.Replacer{}
	runErrs := map[string]error{}
	for _, env := range readmeEnvironments {
		if counts[env] == 0 {
			continue
		}
		workDir := filepath.Join(dir, env)
		if err := os.MkdirAll(workDir, 0o755); err != nil {
			t.Fatalf("make %s: %v", workDir, err)
		}
		if err := os.Symlink(binDir, filepath.Join(workDir, "bin")); err != nil {
			t.Fatalf("link bin: %v", err)
		}
		var kafka, httpAddr, inter, etcd, brokerFlags string
		switch env {
		case readmeSingle:
			b := startBroker(t, brokerOptions{dataDir: filepath.Join(workDir, "data")})
			kafka, httpAddr, inter, etcd = b.kafkaAddr, b.httpAddr, b.interBrokerAddr, b.etcdClientAddr
		case readmeS3:
			srv := s3test.Start(t)
			for _, kv := range srv.Env() { // the broker's credentials
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			b := startBroker(t, brokerOptions{dataDir: filepath.Join(workDir, "data"),
				extraArgs: []string{"--object-store", srv.URL("readme")}})
			kafka, httpAddr, inter, etcd = b.kafkaAddr, b.httpAddr, b.interBrokerAddr, b.etcdClientAddr
		default:
			p := freePorts(t, 5)
			kafka, httpAddr, inter, etcd = p[0], p[1], p[2], p[3]
			// The README's --listeners, when it gives one, names the Kafka
			// port (rewritten below); otherwise --kafka-listen does.
			brokerFlags = strings.Join([]string{
				"--data-dir", filepath.Join(workDir, "data"),
				"--http-listen", httpAddr, "--inter-broker-listen", inter,
				"--etcd-listen-client", etcd, "--etcd-listen-peer", p[4], "--log-level", logLevel(),
			}, " ")
			if !readmeGivesListeners(blocks, env) {
				brokerFlags += " --kafka-listen " + kafka
			}
		}
		rewrite := strings.NewReplacer(
			"127.0.0.1:9092", kafka, "localhost:9092", kafka,
			"127.0.0.1:8080", httpAddr, "localhost:8080", httpAddr,
			"127.0.0.1:9093", inter, "localhost:9093", inter,
			"127.0.0.1:2379", etcd, "localhost:2379", etcd,
		)
		rewrites[env] = rewrite
		script, err := readmeScript(blocks, env, skip, rewrite, outDir, brokerFlags, httpAddr)
		if err != nil {
			t.Fatalf("README.md: %v", err)
		}
		scriptPath := filepath.Join(dir, env+".sh")
		if err := os.WriteFile(scriptPath, []byte(script), 0o644); err != nil {
			t.Fatalf("write script: %v", err)
		}
		environ := append(os.Environ(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
			"SLUICE_SERVER=http://"+httpAddr)
		began := time.Now()
		runErrs[env] = runReadmeScript(bash, scriptPath, workDir, environ)
		t.Logf("%s session: %v", env, time.Since(began).Round(time.Millisecond))
		if brokerFlags != "" {
			readmeCheckBroker(t, env, outDir)
		}
	}

	for bi, bl := range blocks {
		t.Run("README.md:"+strconv.Itoa(bl.line), func(t *testing.T) {
			if why, ok := skip[bl.line]; ok {
				t.Skip(why)
			}
			rewrite := rewrites[bl.env]
			for ci, c := range bl.cmds {
				if stopped[bl.env] {
					t.Errorf("README.md:%d not run: an earlier command of the %s session failed", c.line, bl.env)
					return
				}
				id := readmeID(bi, ci)
				rc, err := os.ReadFile(filepath.Join(outDir, id+".rc"))
				if err != nil {
					stopped[bl.env] = true
					t.Errorf("README.md:%d never finished (script: %v)\n%s", c.line, runErrs[bl.env], rewrite.Replace(c.text))
					return
				}
				stdout, _ := os.ReadFile(filepath.Join(outDir, id+".out"))
				stderr, _ := os.ReadFile(filepath.Join(outDir, id+".err"))
				if code := strings.TrimSpace(string(rc)); code != "0" {
					stopped[bl.env] = true
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
	for env, err := range runErrs {
		if err != nil && !stopped[env] {
			t.Errorf("README %s script: %v", env, err)
		}
	}
	ran := len(blocks) - len(skip)
	t.Logf("README.md: %d sh blocks: %d run (%d %s, %d %s, %d %s), %d marked skip, %d skipped for a missing tool",
		len(blocks), ran, counts[readmeSingle], readmeSingle, counts[readmeS3], readmeS3, counts[readmeSecure], readmeSecure,
		counts[readmeSkip], len(skip)-counts[readmeSkip])
}

// readmeGivesListeners reports whether env's sluiced command sets --listeners.
func readmeGivesListeners(blocks []readmeBlock, env string) bool {
	for _, bl := range blocks {
		for _, c := range bl.cmds {
			if bl.env == env && strings.HasPrefix(strings.TrimSpace(c.text), "sluiced ") && strings.Contains(c.text, "--listeners") {
				return true
			}
		}
	}
	return false
}

// readmeBinDir fills dir with the programs the examples call: sluiced (the
// binary every e2e test starts) and readmeBinaries, taken from beside
// SLUICE_E2E_SLUICED when they are there and built otherwise.
func readmeBinDir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("make %s: %v", dir, err)
	}
	abs, err := filepath.Abs(sluicedPath)
	if err != nil {
		t.Fatalf("sluiced path: %v", err)
	}
	if err := os.Symlink(abs, filepath.Join(dir, "sluiced")); err != nil {
		t.Fatalf("link sluiced: %v", err)
	}
	var build []string
	for _, name := range readmeBinaries {
		if p := filepath.Join(filepath.Dir(abs), name); os.Getenv("SLUICE_E2E_SLUICED") != "" && isFile(p) {
			if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
				t.Fatalf("link %s: %v", name, err)
			}
			continue
		}
		build = append(build, "./cmd/"+name)
	}
	if len(build) > 0 {
		cmd := exec.Command("go", append([]string{"build", "-o", dir + "/"}, build...)...)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %v: %v\n%s", build, err, out)
		}
	}
	return dir
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// readmeCheckBroker fails the test when the broker a session started did
// not exit 0 on SIGTERM, with its log's tail.
func readmeCheckBroker(t *testing.T, env, outDir string) {
	t.Helper()
	rc, err := os.ReadFile(filepath.Join(outDir, env+".broker.rc"))
	if err == nil && strings.TrimSpace(string(rc)) == "0" {
		return
	}
	logText, _ := os.ReadFile(filepath.Join(outDir, env+".broker.log"))
	if err != nil {
		t.Errorf("%s: the broker the README started was never stopped (or never started)\nlog:\n%s", env, lastN(string(logText), 3000))
		return
	}
	t.Errorf("%s: the broker the README started exited %s on SIGTERM\nlog:\n%s", env, strings.TrimSpace(string(rc)), lastN(string(logText), 3000))
}

// parseReadmeBlocks returns every ```sh block of a README with its marker,
// runnable blocks split into commands. A ```sh block must have a marker on
// the line above it (blank lines between allowed), a marker must be
// followed by a ```sh fence, and a `# →` line must follow a command.
func parseReadmeBlocks(src string) ([]readmeBlock, error) {
	lines := strings.Split(src, "\n")
	var blocks []readmeBlock
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, readmeMarkerPrefix) {
			j := i + 1
			for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
				j++
			}
			if j == len(lines) || strings.TrimSpace(lines[j]) != "```sh" {
				return nil, fmt.Errorf("line %d: the marker is not followed by a ```sh block", i+1)
			}
			continue
		}
		if !strings.HasPrefix(l, "```") {
			continue
		}
		end := i + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("line %d: the block is not closed", i+1)
		}
		if l != "```sh" {
			i = end // another language: not an example to run
			continue
		}
		k := i - 1
		for k >= 0 && strings.TrimSpace(lines[k]) == "" {
			k--
		}
		if k < 0 || !strings.HasPrefix(strings.TrimSpace(lines[k]), readmeMarkerPrefix) {
			return nil, fmt.Errorf("line %d: a ```sh block without a marker: put %q above it, or %q when it cannot run in a test",
				i+1, readmeMarkerPrefix+" single-broker -->", readmeMarkerPrefix+" skip: <why> -->")
		}
		bl, err := parseReadmeMarker(strings.TrimSpace(lines[k]), k+1)
		if err != nil {
			return nil, err
		}
		bl.line = i + 1
		if bl.env != readmeSkip {
			body := strings.Join(lines[i+1:end], "\n")
			for _, r := range bl.replace {
				if !strings.Contains(body, r[0]) {
					return nil, fmt.Errorf("line %d: the marker replaces %q, which the block does not contain", k+1, r[0])
				}
			}
			if bl.cmds, err = splitReadmeCommands(lines[i+1:end], i+2); err != nil {
				return nil, err
			}
		}
		blocks = append(blocks, bl)
		i = end
	}
	return blocks, nil
}

// parseReadmeMarker reads `<!-- test: ENV[; replace: OLD => NEW]... -->` or
// `<!-- test: skip: WHY -->`.
func parseReadmeMarker(l string, line int) (readmeBlock, error) {
	if !strings.HasSuffix(l, "-->") {
		return readmeBlock{}, fmt.Errorf("line %d: a marker ends with -->", line)
	}
	body := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(l, readmeMarkerPrefix), "-->"))
	if rest, ok := strings.CutPrefix(body, readmeSkip); ok {
		why := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":"))
		if why == "" {
			return readmeBlock{}, fmt.Errorf("line %d: a skip marker says why: %q", line, readmeMarkerPrefix+" skip: <why> -->")
		}
		return readmeBlock{env: readmeSkip, why: why}, nil
	}
	parts := strings.Split(body, ";")
	bl := readmeBlock{env: strings.TrimSpace(parts[0])}
	known := false
	for _, e := range readmeEnvironments {
		known = known || e == bl.env
	}
	if !known {
		return readmeBlock{}, fmt.Errorf("line %d: the marker names %q; this test knows %v and %q", line, bl.env, readmeEnvironments, readmeSkip)
	}
	for _, p := range parts[1:] {
		spec, ok := strings.CutPrefix(strings.TrimSpace(p), readmeReplace)
		oldText, newText, ok2 := strings.Cut(spec, "=>")
		oldText, newText = strings.TrimSpace(oldText), strings.TrimSpace(newText)
		if !ok || !ok2 || oldText == "" {
			return readmeBlock{}, fmt.Errorf("line %d: %q is not %q", line, strings.TrimSpace(p), readmeReplace+" OLD => NEW")
		}
		bl.replace = append(bl.replace, [2]string{oldText, newText})
	}
	return bl, nil
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

// readmeStartsBroker reports whether one of bl's commands is a sluiced
// command line, which starts its session's broker.
func readmeStartsBroker(bl readmeBlock) bool {
	for _, c := range bl.cmds {
		if strings.HasPrefix(strings.TrimSpace(c.text), "sluiced ") {
			return true
		}
	}
	return false
}

// readmeScript writes the bash script of one environment's session: each
// command in a brace group (so its assignments stay in the session) with
// its output in outDir, its exit status after it, and a stop at the first
// failure. With brokerFlags, the session's one `sluiced` command starts its
// broker: it runs in the background with brokerFlags before its own flags,
// the script waits for the broker's /readyz, and stops it on exit.
func readmeScript(blocks []readmeBlock, env string, skip map[int]string, rewrite *strings.Replacer, outDir, brokerFlags, httpAddr string) (string, error) {
	var s strings.Builder
	s.WriteString("set -o pipefail\n")
	started := false
	for bi, bl := range blocks {
		if _, ok := skip[bl.line]; ok || bl.env != env {
			continue
		}
		for ci, c := range bl.cmds {
			text := c.text
			for _, r := range bl.replace {
				text = strings.ReplaceAll(text, r[0], r[1])
			}
			text = rewrite.Replace(text)
			p := filepath.Join(outDir, readmeID(bi, ci)) // a temp dir: no quote in it
			fmt.Fprintf(&s, "# README.md:%d\n", c.line)
			if !strings.HasPrefix(strings.TrimSpace(text), "sluiced ") {
				fmt.Fprintf(&s, "{\n%s\n} >'%s.out' 2>'%s.err'\nrc=$?\necho $rc >'%s.rc'\n[ $rc -eq 0 ] || exit 0\n", text, p, p, p)
				continue
			}
			if brokerFlags == "" || started {
				return "", fmt.Errorf("line %d: only one command of a %s session starts a broker", c.line, readmeSecure)
			}
			started = true
			b := filepath.Join(outDir, env+".broker")
			fmt.Fprintf(&s, "sluiced_pid=\nstop_broker() { [ -n \"$sluiced_pid\" ] || return; kill -TERM $sluiced_pid; wait $sluiced_pid; echo $? >'%s.rc'; }\ntrap stop_broker EXIT\n", b)
			fmt.Fprintf(&s, "%s >'%s.log' 2>&1 &\nsluiced_pid=$!\n", strings.Replace(strings.TrimSpace(text), "sluiced ", "sluiced "+brokerFlags+" ", 1), b)
			fmt.Fprintf(&s, "rc=1; for _ in $(seq 600); do if curl -sf -o /dev/null 'http://%s/readyz'; then rc=0; break; fi; kill -0 $sluiced_pid 2>/dev/null || break; sleep 0.1; done\n", httpAddr)
			fmt.Fprintf(&s, ": >'%s.out'; echo 'the broker did not answer /readyz; its log: %s.log' >'%s.err'\necho $rc >'%s.rc'\n[ $rc -eq 0 ] || exit 0\n", p, b, p, p)
		}
	}
	if brokerFlags != "" && !started {
		return "", fmt.Errorf("the %s session starts no broker: one of its commands must be a sluiced command line", env)
	}
	return s.String(), nil
}

// runReadmeScript runs the script in its own process group, which is killed
// whole if it outlives readmeScriptLimit (brokers, kcat and curl children
// included).
func runReadmeScript(bash, script, workDir string, environ []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), readmeScriptLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, script)
	cmd.Dir = workDir
	cmd.Env = environ
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
// string; a bare `…` in JSON matches any value (as an array's last
// element: any number of further elements), and a `"…"` key allows keys
// the README does not show.
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
		more := len(w) > 0 && w[len(w)-1] == readmeAny // a last bare `…`: any further elements
		if more {
			w = w[:len(w)-1]
		}
		if !ok || len(g) < len(w) || (!more && len(g) != len(w)) {
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

// TestReadmeExampleConvention checks the parts of the convention that need
// no broker: how blocks are found and cut into commands, and how output is
// matched.
func TestReadmeExampleConvention(t *testing.T) {
	readme := strings.Join([]string{
		"text",
		"<!-- test: skip: needs three brokers -->",
		"```sh",
		"make cluster ...",
		"```",
		"<!-- test: single-broker; replace: -t t => -t t2 -->",
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
	if len(blocks) != 2 || blocks[0].line != 3 || blocks[0].env != "skip" || blocks[0].why != "needs three brokers" || blocks[0].cmds != nil ||
		blocks[1].line != 7 || blocks[1].env != "single-broker" || fmt.Sprint(blocks[1].replace) != "[[-t t -t t2]]" {
		t.Fatalf("blocks = %+v, want a skipped block at line 3 and a single-broker block at line 7 replacing -t t", blocks)
	}
	cmds := blocks[1].cmds
	wantLines, wantChecked := []int{8, 12, 16}, []int{1, 2, 0}
	if len(cmds) != len(wantLines) {
		t.Fatalf("commands = %+v, want %d", cmds, len(wantLines))
	}
	for i, c := range cmds {
		if c.line != wantLines[i] || len(c.want) != wantChecked[i] {
			t.Errorf("command %d = line %d with %d output lines, want line %d with %d", i, c.line, len(c.want), wantLines[i], wantChecked[i])
		}
	}
	if got := readmeBlockTools(blocks[1]); strings.Join(got, ",") != "kcat,jq,curl" {
		t.Errorf("tools = %v, want kcat, jq and curl", got)
	}

	for _, bad := range []string{
		"<!-- test: single-broker -->\ntext\n```sh\ntrue\n```",
		"<!-- test: single-broker -->\n```sh\n# → out\n```",
		"<!-- test: single-broker -->\n```sh\necho 'open\n```",
		"<!-- test: single-broker -->\n```sh\ntrue\n",
		"text\n```sh\nunmarked\n```",
		"<!-- test: single-broker -->\n```sh\ntrue\n```\n```sh\nunmarked\n```",
		"<!-- test: skip -->\n```sh\ntrue\n```",
		"<!-- test: cluster -->\n```sh\ntrue\n```",
		"<!-- test: single-broker; replace: 30s => 1s -->\n```sh\ntrue\n```",
		"<!-- test: single-broker; swap: a => b -->\n```sh\ntrue a\n```",
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
		{`[1,…]`, `[1,2,3]`, true},
		{`[1,…]`, `[1]`, true},
		{`[1,…]`, `[2,3]`, false},
		{`[{"a":1,"…":…},…]`, `[{"a":1,"b":2},{"c":3}]`, true},
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
