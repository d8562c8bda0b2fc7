package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"rackpool/api"
	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/internal/hba"
)

// One writer per drive, as the CLI sees it (docs/storage.md): drive
// connect and drive token name the write reservation's holder, may
// preempt, and drive release (or drive connect's clean exit) gives the
// reservation back.

// defaultConnectHolder is drive connect's holder name unless --holder
// says another: this process on this host, so that a second drive
// connect, here or elsewhere, is refused while this one writes.
func defaultConnectHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("%s/drive-connect/%d", host, os.Getpid())
}

// writes reports whether rights ("r", "w", "rw", "") include writing.
func writes(rights string) bool { return rights == "" || strings.Contains(rights, "w") }

// connectResolver asks the control plane for the drive's current path.
// With write rights it names holder; it preempts only until the first
// answer: a later preempt by someone else must end this process's
// writing, not be undone by its next reconnection. A refusal by another
// holder's reservation is final (hba.ErrRevoked).
func connectResolver(c *api.Client, rights, holder string, preempt bool) hba.ResolverFunc {
	var first atomic.Bool
	first.Store(preempt)
	return func(ctx context.Context, drive string) (hba.Path, error) {
		req := api.DriveConnect{Rights: rights, Preempt: first.Load()}
		if writes(rights) {
			req.Holder = holder
		}
		g, err := c.ConnectDrive(ctx, drive, req)
		var ae *api.Error
		if errors.As(err, &ae) && ae.Status == http.StatusConflict {
			return hba.Path{}, fmt.Errorf("%w: %w", hba.ErrRevoked, err)
		}
		if err != nil {
			return hba.Path{}, err
		}
		first.Store(false)
		return hba.Path{Endpoint: g.Endpoint, Export: g.ExportName, Epoch: g.Epoch, Node: g.BlockNode}, nil
	}
}

// releaseWriter gives holder's write reservation of drive back as drive
// connect exits cleanly, so the next writer needs no preempt.
func releaseWriter(c *api.Client, drive, holder string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.ReleaseDrive(ctx, drive, holder); err != nil {
		log.Warn("could not release the write reservation; the next writer will have to preempt it", "drive", drive, "holder", holder, "err", err)
		return
	}
	log.Info("write reservation released", "drive", drive, "holder", holder)
}

// writerColumn is the WRITER column of `rackpool drives`.
func writerColumn(d api.Drive) string {
	if d.WriteReservation == nil {
		return "-"
	}
	return d.WriteReservation.Holder
}

// driveReleaseCmd is `rackpool drive release DRIVE [--holder NAME]`: it
// gives a write reservation back.
func driveReleaseCmd() *cobra.Command {
	cf := &clientFlags{}
	var holder string
	cmd := clientVerb(&cobra.Command{
		Use:   "release DRIVE [--holder NAME]",
		Short: "give a drive's write reservation back",
		Long:  "Gives the drive's write reservation back, so that another holder may write.",
		Args:  cli.OneArg,
	}, cf, func(ctx context.Context, c *api.Client, args []string) error {
		d, err := c.ReleaseDrive(ctx, args[0], holder)
		if err != nil {
			return err
		}
		if cf.json {
			return cli.PrintJSON(d)
		}
		fmt.Printf("%s: no writer\n", d.ID)
		return nil
	})
	cmd.Flags().StringVar(&holder, "holder", "", "the reservation's holder (default: the one drive token gives this account, ACCOUNT@ADDRESS)")
	return cmd
}

// holderLog is the holder drive connect logs: none for a reader.
func holderLog(rights, holder string) string {
	if !writes(rights) {
		return "-"
	}
	return holder
}

// revokedError is drive connect's exit once another holder took the
// drive's write reservation over: it names the new holder.
func revokedError(drive string, err error) error {
	var ae *api.Error
	if errors.As(err, &ae) {
		return fmt.Errorf("drive %s was taken over by another writer; this process no longer serves it: %s", drive, ae.Resolution)
	}
	return fmt.Errorf("drive %s: %w", drive, err)
}
