package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/journal"
	"github.com/agentry-dev/agentry/store"
	"github.com/spf13/cobra"
)

// auditFlags name the journal an audit command reads: a journal file, or
// the store agentry serve keeps it in.
type auditFlags struct {
	file  string
	store string
	data  string
}

func (f *auditFlags) register(cmd *cobra.Command) {
	fl := cmd.PersistentFlags()
	fl.StringVar(&f.file, "file", "", "a file journal (internal/journal) instead of a store")
	fl.StringVar(&f.store, "store", "", "store URL holding the journal: sqlite:///path or postgres://… (default sqlite in --data)")
	fl.StringVar(&f.data, "data", "./agentry-data", "data directory of agentry serve (its default SQLite store)")
}

// open returns the journal the flags name, read-only where the backend
// allows, and its closer.
func (f *auditFlags) open(ctx context.Context) (govern.Journal, func() error, error) {
	if f.file != "" {
		if f.store != "" {
			return nil, nil, usageError("--file and --store name two journals: give one")
		}
		j, err := journal.Open(f.file, &journal.Options{ReadOnly: true})
		if err != nil {
			return nil, nil, err
		}
		return j, j.Close, nil
	}
	url := f.store
	if url == "" {
		path := filepath.Join(f.data, "agentry.db")
		if _, err := os.Stat(path); err != nil {
			return nil, nil, fmt.Errorf("no journal: %w (give --store, --file or the --data of agentry serve)", err)
		}
		url = "sqlite://" + path
	}
	if url == "memory:" {
		return nil, nil, usageError("a memory: store keeps no journal to audit")
	}
	st, err := store.Open(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	return st.Journal(), st.Close, nil
}

func auditCmd(e *env) *cobra.Command {
	var f auditFlags
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Check and read the governance audit journal (UAICP 0.3 §5.4)",
		Long: `Check and read the hash-chained audit journal every governed run writes:
each record names its request, W3C trace id, time, actor and what happened
(a phase transition, a tool call's intent and outcome, an approval, a
rollback), and carries the hash of the record before it, so deleting,
editing or reordering records breaks the chain.

The journal is read from the store agentry serve uses (--store, default the
SQLite file in --data) or from a file journal (--file).`,
		Example: `  agentry audit verify
  agentry audit show --run 7f0c…
  agentry audit show --format jsonl --from 120 --file journal.jsonl`,
	}
	f.register(cmd)

	verify := &cobra.Command{
		Use:   "verify",
		Short: "Verify the journal's hash chain from its first record; exit 1 if it is broken",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			j, closeJ, err := f.open(cmd.Context())
			if err != nil {
				return err
			}
			defer closeJ()
			var v govern.ChainVerifier
			for r, err := range j.Records(cmd.Context(), 1) {
				if err == nil {
					err = v.Next(r)
				}
				if err != nil {
					var ce *govern.ChainError
					if errors.As(err, &ce) {
						fmt.Fprintf(e.stdout, "BROKEN at record %d: %s (%d records before it verified)\n", ce.Seq, ce.Reason, v.Count())
						return &exitError{code: 1, err: err}
					}
					return err
				}
			}
			if h := v.Head(); h != nil {
				fmt.Fprintf(e.stdout, "ok: %d records, chain intact; head %d %s\n", v.Count(), h.Seq, h.Hash)
			} else {
				fmt.Fprintln(e.stdout, "ok: the journal is empty")
			}
			return nil
		},
	}

	var run, format string
	var from uint64
	show := &cobra.Command{
		Use:   "show",
		Short: "Print journal records: all, from a sequence number, or one run's",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "jsonl" {
				return usageError("--format %q: want text or jsonl", format)
			}
			j, closeJ, err := f.open(cmd.Context())
			if err != nil {
				return err
			}
			defer closeJ()
			return showRecords(cmd.Context(), e.stdout, j, run, from, format)
		},
	}
	show.Flags().StringVar(&run, "run", "", "only the records of this run (request_id)")
	show.Flags().Uint64Var(&from, "from", 1, "first sequence number")
	show.Flags().StringVar(&format, "format", "text", "text (a table) or jsonl (the records as stored)")

	cmd.AddCommand(verify, show)
	return cmd
}

// showRecords prints j's records from seq from, only run's when set.
func showRecords(ctx context.Context, w io.Writer, j govern.Journal, run string, from uint64, format string) error {
	var tw *tabwriter.Writer
	if format == "text" {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		defer tw.Flush()
		fmt.Fprintln(tw, "SEQ\tTIME\tREQUEST\tKIND\tDETAIL\tOUTCOME")
	}
	enc := json.NewEncoder(w)
	for r, err := range j.Records(ctx, from) {
		if err != nil {
			return err
		}
		if run != "" && r.RequestID != run {
			continue
		}
		if tw == nil {
			if err := enc.Encode(r); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.Seq, r.Timestamp.UTC().Format(govern.TimeFormat), r.RequestID, r.Kind, recordDetail(r), outcomeText(r))
	}
	return nil
}

// recordDetail is the short "what" of a record for the text table.
func recordDetail(r govern.Record) string {
	var parts []string
	if r.From != "" || r.To != "" {
		parts = append(parts, string(r.From)+"→"+string(r.To))
	}
	if r.Tool != "" {
		parts = append(parts, "tool="+r.Tool)
	}
	if r.CallID != "" {
		parts = append(parts, "call="+r.CallID)
	}
	if r.Actor.ID != "" {
		parts = append(parts, "actor="+r.Actor.ID+" ("+string(r.Actor.Kind)+")")
	}
	return strings.Join(parts, " ")
}

func outcomeText(r govern.Record) string {
	s := string(r.Outcome)
	for _, reason := range r.Reasons {
		s += " " + string(reason)
	}
	return strings.TrimSpace(s)
}
