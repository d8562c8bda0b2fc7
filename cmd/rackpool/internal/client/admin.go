package client

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"rackpool/api"
	"rackpool/cmd/rackpool/internal/cli"
)

// Administration verbs: allocation export and the audit log.

func ExportCmd() *cobra.Command {
	cf := &Flags{}
	var out string
	cmd := clientVerb(&cobra.Command{
		Use:   "export [-o FILE]",
		Short: "export the current allocation (systems, tenants) for 'serve --import'",
		Long: "Exports the current allocation, every composed system and tenant, as the JSON document\n" +
			"'rackpool serve --import' restores (the Rackpool.ExportAllocation action).",
		Example: "  rackpool export -o alloc.json",
		Args:    cli.NoArgs,
	}, cf, func(ctx context.Context, c *api.Client, _ []string) error {
		var doc json.RawMessage
		if _, err := c.Do(ctx, "POST", "/redfish/v1/CompositionService/Actions/Oem/Rackpool.ExportAllocation", map[string]any{}, &doc); err != nil {
			return err
		}
		if out == "" {
			_, err := os.Stdout.Write(append(doc, '\n'))
			return err
		}
		return cli.WriteFile(out, append(doc, '\n'), 0o600)
	})
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of standard output")
	return cmd
}

type auditEntry struct {
	ID        string
	Created   string
	MessageID string `json:"MessageId"`
	Oem       struct {
		Rackpool struct {
			User, Tenant, Remote, Method, Target, Action, Outcome, Detail string
			Status                                                        int
		}
	}
}

func AuditCmd() *cobra.Command {
	cf := &Flags{}
	var user, outcome, since, format string
	cmd := clientVerb(&cobra.Command{
		Use:     "audit [--user U] [--outcome O] [--since T] [--format table|csv|jsonl]",
		Short:   "print or export the audit log",
		Long:    "Prints the audit log, every entry or those the flags select, as a table, CSV or JSON lines.",
		Example: "  rackpool audit --outcome denied --since 2026-01-01T00:00:00Z --format csv",
		Args:    cli.NoArgs,
	}, cf, func(ctx context.Context, c *api.Client, _ []string) error {
		return printAudit(ctx, c, user, outcome, since, format)
	})
	fs := cmd.Flags()
	fs.StringVar(&user, "user", "", "only this account's entries")
	fs.StringVar(&outcome, "outcome", "", "only success, failure or denied")
	fs.StringVar(&since, "since", "", "only entries at or after this RFC 3339 time")
	fs.StringVar(&format, "format", "table", "table, csv or jsonl")
	return cmd
}

func printAudit(ctx context.Context, c *api.Client, user, outcome, since, format string) error {
	q := url.Values{"limit": {"1000"}}
	for k, v := range map[string]string{"user": user, "outcome": outcome, "since": since} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var w *csv.Writer
	switch format {
	case "table":
		fmt.Printf("%-6s %-30s %-14s %-8s %-7s %-4s %s\n", "ID", "TIME", "USER", "TENANT", "OUTCOME", "CODE", "ACTION")
	case "csv":
		w = csv.NewWriter(os.Stdout)
		_ = w.Write([]string{"id", "time", "user", "tenant", "remote", "method", "target", "action", "outcome", "status", "message_id", "detail"})
	case "jsonl":
	default:
		return fmt.Errorf("--format: want table, csv or jsonl, got %q", format)
	}
	for {
		var page struct {
			Members  []auditEntry
			NextLink string `json:"Members@odata.nextLink"`
		}
		if _, err := c.Do(ctx, "GET", "/redfish/v1/Managers/rackpool/LogServices/Audit/Entries?"+q.Encode(), nil, &page); err != nil {
			return err
		}
		for _, e := range page.Members {
			r := e.Oem.Rackpool
			switch format {
			case "table":
				fmt.Printf("%-6s %-30s %-14s %-8s %-7s %-4d %s %s\n", e.ID, e.Created, r.User, r.Tenant, r.Outcome, r.Status, r.Method, r.Target)
			case "csv":
				_ = w.Write([]string{e.ID, e.Created, r.User, r.Tenant, r.Remote, r.Method, r.Target, r.Action, r.Outcome, strconv.Itoa(r.Status), e.MessageID, r.Detail})
			case "jsonl":
				b, _ := json.Marshal(map[string]any{"id": e.ID, "time": e.Created, "user": r.User, "tenant": r.Tenant, "remote": r.Remote,
					"method": r.Method, "target": r.Target, "action": r.Action, "outcome": r.Outcome, "status": r.Status, "message_id": e.MessageID, "detail": r.Detail})
				fmt.Println(string(b))
			}
		}
		if page.NextLink == "" || len(page.Members) == 0 {
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
