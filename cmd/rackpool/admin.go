package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strconv"
)

// Administration verbs: allocation export and the audit log.

func runExport(args []string) error {
	fs, cf := newClientFlags("export")
	out := fs.String("o", "", "write to this file instead of standard output")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	var doc json.RawMessage
	if _, err := c.Do(context.Background(), "POST", "/redfish/v1/CompositionService/Actions/Oem/Rackpool.ExportAllocation", map[string]any{}, &doc); err != nil {
		return err
	}
	if *out == "" {
		_, err := os.Stdout.Write(append(doc, '\n'))
		return err
	}
	return writeFile(*out, append(doc, '\n'), 0o600)
}

type auditEntry struct {
	ID      string
	Created string
	Oem     struct {
		Rackpool struct {
			User, Tenant, Remote, Method, Target, Action, Outcome, Detail string
			Status                                                        int
		}
	}
}

func runAudit(args []string) error {
	fs, cf := newClientFlags("audit")
	user := fs.String("user", "", "only this account's entries")
	outcome := fs.String("outcome", "", "only success, failure or denied")
	since := fs.String("since", "", "only entries at or after this RFC 3339 time")
	format := fs.String("format", "table", "table, csv or jsonl")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	q := url.Values{"limit": {"1000"}}
	for k, v := range map[string]string{"user": *user, "outcome": *outcome, "since": *since} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var w *csv.Writer
	switch *format {
	case "table":
		fmt.Printf("%-6s %-30s %-14s %-8s %-7s %-4s %s\n", "ID", "TIME", "USER", "TENANT", "OUTCOME", "CODE", "ACTION")
	case "csv":
		w = csv.NewWriter(os.Stdout)
		_ = w.Write([]string{"id", "time", "user", "tenant", "remote", "method", "target", "action", "outcome", "status", "detail"})
	case "jsonl":
	default:
		return fmt.Errorf("--format: want table, csv or jsonl, got %q", *format)
	}
	for {
		var page struct {
			Members []auditEntry
			Oem     struct{ Rackpool struct{ NextPage string } }
		}
		if _, err := c.Do(context.Background(), "GET", "/redfish/v1/Managers/rackpool/LogServices/Audit/Entries?"+q.Encode(), nil, &page); err != nil {
			return err
		}
		for _, e := range page.Members {
			r := e.Oem.Rackpool
			switch *format {
			case "table":
				fmt.Printf("%-6s %-30s %-14s %-8s %-7s %-4d %s %s\n", e.ID, e.Created, r.User, r.Tenant, r.Outcome, r.Status, r.Method, r.Target)
			case "csv":
				_ = w.Write([]string{e.ID, e.Created, r.User, r.Tenant, r.Remote, r.Method, r.Target, r.Action, r.Outcome, strconv.Itoa(r.Status), r.Detail})
			case "jsonl":
				b, _ := json.Marshal(map[string]any{"id": e.ID, "time": e.Created, "user": r.User, "tenant": r.Tenant, "remote": r.Remote,
					"method": r.Method, "target": r.Target, "action": r.Action, "outcome": r.Outcome, "status": r.Status, "detail": r.Detail})
				fmt.Println(string(b))
			}
		}
		if page.Oem.Rackpool.NextPage == "" || len(page.Members) == 0 {
			break
		}
		q.Set("after", page.Members[len(page.Members)-1].ID)
	}
	if w != nil {
		w.Flush()
		return w.Error()
	}
	return nil
}
