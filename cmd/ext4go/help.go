package main

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
)

// examples are shown at the end of each command's --help.
var examples = map[string][]string{
	"batch":      {"printf 'mkdir /etc\\nput hosts /etc/hosts\\n' | ext4go batch disk.img"},
	"bench":      {"ext4go bench alloc -p 1,2,4", "ext4go bench read --compare disk.img", "ext4go bench age --seed 7 --json", "ext4go bench appenders --fsync-every 1M", "scripts/bench-age.sh appenders --fallocate"},
	"cat":        {"ext4go cat disk.img /etc/hostname"},
	"chmod":      {"ext4go chmod disk.img 0755 /usr/bin/tool", "ext4go chmod -R disk.img u+w /srv"},
	"chown":      {"ext4go chown -R disk.img 1000:1000 /home/user"},
	"fallocate":  {"ext4go fallocate -l 64M disk.img /var/swapfile"},
	"frag":       {"ext4go frag -v disk.img /var/lib/db", "ext4go frag --json disk.img"},
	"freefrag":   {"ext4go freefrag disk.img", "ext4go freefrag -c 1024 --json disk.img"},
	"map":        {"ext4go map -o disk.svg disk.img", "ext4go map disk.img /var/lib/db -o db.svg && rsvg-convert db.svg -o db.png"},
	"get":        {"ext4go get disk.img /etc ./etc-copy"},
	"getfattr":   {"ext4go getfattr -d disk.img /usr/bin/ping"},
	"info":       {"ext4go info disk.img"},
	"ln":         {"ext4go ln -s disk.img /usr/bin/python3 /usr/bin/python"},
	"ls":         {"ext4go ls -l disk.img /etc", "ext4go ls -R disk.img"},
	"mkdir":      {"ext4go mkdir -p disk.img /srv/www/html"},
	"mkfs":       {"ext4go mkfs -d ./rootfs disk.img", "ext4go mkfs --size 1G -L data disk.img", "ext4go mkfs --tar - disk.img < layer.tar.gz"},
	"mv":         {"ext4go mv disk.img /tmp/a /srv/a"},
	"put":        {"ext4go put disk.img ./site /srv/www", "ext4go put disk.img notes.txt /root/"},
	"rm":         {"ext4go rm -r disk.img /var/cache/apt"},
	"setfattr":   {"ext4go setfattr -n user.note -v hello disk.img /etc/motd"},
	"stat":       {"ext4go stat disk.img /bin/sh"},
	"touch":      {"ext4go touch -d 2024-01-01 disk.img /etc/stamp"},
	"truncate":   {"ext4go truncate -s 1M disk.img /var/log/big.log"},
	"write":      {"echo hello | ext4go write disk.img /etc/motd"},
	"help":       {"ext4go help mkfs"},
	"version":    {"ext4go version"},
	"completion": {"source <(ext4go completion bash)", "ext4go completion zsh > \"${fpath[1]}/_ext4go\""},
}

func printExamples(w io.Writer, name string) {
	ex := examples[strings.Fields(name)[0]]
	if len(ex) == 0 {
		return
	}
	fmt.Fprintln(w, "examples:")
	for _, x := range ex {
		fmt.Fprintf(w, "  %s\n", x)
	}
}

func init() {
	register(&command{name: "help", usage: "[COMMAND]", summary: "show the commands, or one command's options and examples", run: runHelp})
	register(&command{name: "version", usage: "", summary: "show ext4go's version and the source revision it was built from", run: runVersion})
	register(&command{name: "completion", usage: "bash|zsh", summary: "print a shell completion script for bash or zsh", run: runCompletion})
}

func runHelp(e *env, args []string) error {
	if len(args) == 0 {
		printUsage(e.stdout)
		return nil
	}
	c, ok := commands[args[0]]
	if !ok {
		return usagef("unknown command %q", args[0])
	}
	if c.name == "help" || c.name == "version" || c.name == "completion" {
		fmt.Fprintf(e.stdout, "usage: ext4go %s %s\n%s\n", c.name, c.usage, c.summary)
		printExamples(e.stdout, c.name)
		return nil
	}
	var out bytes.Buffer
	c.run(&env{stdin: strings.NewReader(""), stdout: &out, stderr: &out}, append(args[1:], "--help"))
	_, err := e.stdout.Write(out.Bytes())
	return err
}

// versionString is the module version and the VCS revision the binary was
// built from (debug.BuildInfo), e.g. "ext4go v0.0.0 (rev 9433536, 2026-12-01)".
// version is the release a build says it is, set by the release build:
// go build -ldflags "-X main.version=v1.2.3". Otherwise the module's
// version is said (go install ...@v1.2.3), or (devel).
var version string

func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "ext4go " + cmp.Or(version, "(devel)") + " (no build information)"
	}
	v := cmp.Or(version, bi.Main.Version)
	if v == "" {
		v = "(devel)"
	}
	var rev, when, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", modified"
			}
		}
	}
	out := "ext4go " + v
	switch {
	case rev != "":
		out += fmt.Sprintf(" (revision %s, %s%s)", rev, when, dirty)
	case v == "(devel)":
		// Neither a release nor a revision: say why, so a bug report
		// says what was built.
		out += " (no revision: built outside a git checkout or with -buildvcs=false)"
	}
	return out + ", " + bi.GoVersion
}

func runVersion(e *env, args []string) error {
	if len(args) > 0 {
		return usagef("version takes no arguments")
	}
	fmt.Fprintln(e.stdout, versionString())
	return nil
}

// commandOptions returns the options a command accepts, read from its own
// --help (so that completion follows the one definition of each option).
var optionPattern = regexp.MustCompile(`(?m)^  (-[A-Za-z0-9](?:, --[a-z0-9-]+)?|--[a-z0-9-]+)`)

func commandOptions(c *command) []string {
	if c.name == "help" || c.name == "version" || c.name == "completion" {
		return nil
	}
	var out bytes.Buffer
	c.run(&env{stdin: strings.NewReader(""), stdout: &out, stderr: &out}, []string{"--help"})
	var opts []string
	for _, m := range optionPattern.FindAllStringSubmatch(out.String(), -1) {
		for _, o := range strings.Split(m[1], ", ") {
			opts = append(opts, o)
		}
	}
	return append(opts, "--help")
}

func runCompletion(e *env, args []string) error {
	if len(args) != 1 || (args[0] != "bash" && args[0] != "zsh") {
		return usagef("want bash or zsh")
	}
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	if args[0] == "zsh" {
		// zsh runs the bash function through its bash completion layer.
		b.WriteString("#compdef ext4go\nautoload -U +X bashcompinit && bashcompinit\n")
	}
	b.WriteString("# ext4go completion for " + args[0] + ": commands, their options, then files.\n")
	b.WriteString("_ext4go() {\n\tlocal cur=${COMP_WORDS[COMP_CWORD]} opts=\n")
	fmt.Fprintf(&b, "\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n\t\treturn\n\tfi\n", strings.Join(names, " "))
	b.WriteString("\tcase ${COMP_WORDS[1]} in\n")
	for _, n := range names {
		if n == "help" {
			fmt.Fprintf(&b, "\thelp) COMPREPLY=($(compgen -W %q -- \"$cur\")); return ;;\n", strings.Join(names, " "))
			continue
		}
		if n == "completion" {
			b.WriteString("\tcompletion) COMPREPLY=($(compgen -W \"bash zsh\" -- \"$cur\")); return ;;\n")
			continue
		}
		fmt.Fprintf(&b, "\t%s) opts=%q ;;\n", n, strings.Join(commandOptions(commands[n]), " "))
	}
	b.WriteString("\tesac\n\tif [[ $cur == -* ]]; then\n\t\tCOMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n\telse\n\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n\tfi\n}\n")
	b.WriteString("complete -o default -F _ext4go ext4go\n")
	_, err := io.WriteString(e.stdout, b.String())
	return err
}
