// Package cli implements the agentry command line. cmd/agentry is a thin
// main around Main, so that the commands are testable in-process.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/internal/otelsetup"
	"github.com/agentry-dev/agentry/internal/telemetry"
)

// telemetryFlushTimeout bounds the flush of OpenTelemetry data when a
// command ends (an unreachable collector must not hold the exit).
const telemetryFlushTimeout = 5 * time.Second

// Version is the agentry version; release builds set it with
// -ldflags "-X github.com/agentry-dev/agentry/internal/cli.Version=v1.2.3".
var Version = "dev"

// exitError carries a process exit code through cobra.
type exitError struct {
	code int
	err  error
	// quiet: the command already said what went wrong; Main prints
	// nothing more.
	quiet bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks a mistake in how the command was invoked (exit 2).
func usageError(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// env is what commands read from and write to; tests replace it.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	isTTY  bool
}

// Main runs the agentry command with args (without the program name) and
// returns the process exit code: 0 on success, 1 on failure, 2 on misuse.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return run(ctx, args, &env{stdin: stdin, stdout: stdout, stderr: stderr, isTTY: isTerminal(stdin)})
}

func run(ctx context.Context, args []string, e *env) int {
	root := &cobra.Command{
		Use:   "agentry",
		Short: "Open agent protocols in one binary: UPP/UAP agents, UAIP workflows, UAICP governance, UAMP messaging, UIAP UI control",
		Long: `agentry implements the open agent protocols in one Go module and one binary.

Run a prompt on any provider (offline demo model by default):

  agentry llm "What is (12 + 30) * 2?"
  agentry llm -m anthropic:claude-sonnet-4-5 "Write a haiku about Go"`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.Version = version()
	root.SetVersionTemplate(versionText()) // agentry --version says what agentry version says
	root.SetArgs(args)
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.AddCommand(versionCmd(e), llmCmd(e), runCmd(e), serveCmd(e), agentsCmd(e), uaipCmd(e), conformanceCmd(e), keysCmd(e), approvalsCmd(e), approveCmd(e), auditCmd(e), uampCmd(e), uiapCmd(e), mcpCmd(e))

	// OpenTelemetry, as the OTEL_* environment asks (off by default);
	// its buffers are flushed when the command ends.
	tel, err := otelsetup.Setup(ctx, &otelsetup.Options{ServiceVersion: version()})
	if err != nil {
		fmt.Fprintln(e.stderr, "agentry:", err)
		return 2
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), telemetryFlushTimeout)
		defer cancel()
		if err := tel.Shutdown(sctx); err != nil {
			slog.Warn("flushing OpenTelemetry data", "error", err)
		}
	}()

	// A command that talks to a server is one span — "agentry approve"
	// — so that its requests carry a traceparent and the server's spans
	// join its trace. serve has spans of its own.
	var cmdSpan trace.Span
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		if cmd.Name() == "serve" {
			return
		}
		var sctx context.Context
		sctx, cmdSpan = telemetry.Tracer(nil).Start(cmd.Context(), cmd.CommandPath(), trace.WithSpanKind(trace.SpanKindClient))
		cmd.SetContext(sctx)
	}
	err = root.ExecuteContext(ctx)
	if cmdSpan != nil {
		telemetry.EndError(cmdSpan, err)
	}
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if !ee.quiet {
			fmt.Fprintln(e.stderr, "agentry:", err)
		}
		return ee.code
	}
	fmt.Fprintln(e.stderr, "agentry:", err)
	if isCobraUsage(err) {
		return 2
	}
	return 1
}

// protocols lists the protocol versions agentry implements, as
// agentry version prints them.
var protocols = []string{
	"UPP-1.3 (LLM providers)",
	"UAP-1.1 (agents)",
	"UAIP-0.1 (workflows)",
	"UAICP-0.3 (governance)",
	"UAMP-1.0 (messaging)",
	"UIAP Core 0.1 (UI control)",
}

// version is Version, or the module version a go install recorded.
func version() string {
	v := Version
	if info, ok := debug.ReadBuildInfo(); ok && v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v = info.Main.Version
	}
	return v
}

// versionText is what agentry version and agentry --version print.
func versionText() string {
	return fmt.Sprintf("agentry %s (%s, %s/%s)\nprotocols: %s\n", version(), runtime.Version(), runtime.GOOS, runtime.GOARCH, strings.Join(protocols, ", "))
}

func versionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and the protocol versions implemented",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprint(e.stdout, versionText())
			return err
		},
	}
}
