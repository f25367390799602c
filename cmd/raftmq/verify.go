package main

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/verify"
	"github.com/raftmq/raftmq/vfs"
)

func verifyCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "verify DIR [DIR...]",
		Short: "Check data dirs offline, and that replicas are identical",
		Long: `Check node data dirs offline (nothing is modified): every commitlog entry,
the checkpoint, every consume-queue unit, contiguous queue offsets; with
several dirs, that the replicas are byte-identical up to their common
confirm offset. Exit status 1 when a check failed.`,
		Annotations: map[string]string{offline: "true"},
		Args:        positional(1, -1, "verify DIR [DIR...]"),
		RunE:        e.action(func(e *env, _ *cobra.Command, args []string) error { return verifyDirs(e, args) }),
	}
}

// verifyDirs runs the offline store verification (internal consistency of each
// data dir, and replicas byte-identical up to their common confirmOffset).
func verifyDirs(e *env, dirs []string) error {
	if !e.json {
		err := verify.Stores(vfs.OS(), dirs, e.stdout)
		if err == nil {
			fmt.Fprintf(e.stdout, "verified %d store(s): OK\n", len(dirs))
		}
		return err
	}
	var report bytes.Buffer
	err := verify.Stores(vfs.OS(), dirs, &report)
	out := parseVerifyReport(report.String())
	out.OK, out.Dirs = err == nil, dirs
	if err != nil {
		out.Error = err.Error()
	}
	return errors.Join(e.emit(out), err)
}

// verifyJSON is `verify --json`: the report's lines as fields.
type verifyJSON struct {
	OK         bool           `json:"ok"`
	Dirs       []string       `json:"dirs"`
	Stores     []verifyStore  `json:"stores"`
	Comparison *verifyCompare `json:"comparison,omitempty"`
	Other      []string       `json:"other,omitempty"` // lines of no known form
	Error      string         `json:"error,omitempty"`
	byDir      map[string]int // index into Stores
}

type verifyStore struct {
	Dir      string           `json:"dir"`
	OK       bool             `json:"ok"`
	Fields   map[string]int64 `json:"fields"` // min, confirm, checkpoint, entries, messages, queues, errors, warnings
	Last     string           `json:"last,omitempty"`
	Errors   []string         `json:"errors"`
	Warnings []string         `json:"warnings"`
}

type verifyCompare struct {
	OK      bool   `json:"ok"`
	Message string `json:"message"`
}

var (
	verifySummaryRE = regexp.MustCompile(`^(.+): (ok|FAILED) ((?:\w+=\S+ ?)+)$`)
	verifyIssueRE   = regexp.MustCompile(`^(.+): (error|warning): (.*)$`)
)

// parseVerifyReport turns verify.Stores's report (one line per finding,
// one summary line per store, "compare: ..." lines) into verifyJSON.
func parseVerifyReport(report string) verifyJSON {
	out := verifyJSON{Stores: []verifyStore{}, byDir: map[string]int{}}
	get := func(dir string) *verifyStore {
		if i, ok := out.byDir[dir]; ok {
			return &out.Stores[i]
		}
		i := len(out.Stores)
		out.Stores = append(out.Stores, verifyStore{Dir: dir, Fields: map[string]int64{}, Errors: []string{}, Warnings: []string{}})
		out.byDir[dir] = i
		return &out.Stores[i]
	}
	for _, line := range strings.Split(strings.TrimSpace(report), "\n") {
		switch {
		case line == "":
		case strings.HasPrefix(line, "compare: "):
			msg := strings.TrimPrefix(line, "compare: ")
			c := &verifyCompare{Message: msg, OK: !strings.HasPrefix(msg, "error:")}
			if out.Comparison != nil && !out.Comparison.OK {
				c.OK = false
				c.Message = out.Comparison.Message + "; " + msg
			}
			out.Comparison = c
		case verifySummaryRE.MatchString(line):
			m := verifySummaryRE.FindStringSubmatch(line)
			s := get(m[1])
			s.OK = m[2] == "ok"
			for _, kv := range strings.Fields(m[3]) {
				k, v, _ := strings.Cut(kv, "=")
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					s.Fields[k] = n
				} else if k == "last" {
					s.Last = v // index/term
				}
			}
		case verifyIssueRE.MatchString(line):
			m := verifyIssueRE.FindStringSubmatch(line)
			s := get(m[1])
			if m[2] == "error" {
				s.Errors = append(s.Errors, m[3])
			} else {
				s.Warnings = append(s.Warnings, m[3])
			}
		default:
			out.Other = append(out.Other, line)
		}
	}
	return out
}
