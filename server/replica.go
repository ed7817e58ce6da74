package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/audit"
)

// A replica's node name is held, like a run, by a lease ("node:" and the
// name) in the journal's store, renewed every third of the run lease:
// two live processes with one name would each claim the other's runs as
// their own at startup, so the second is refused.

// leases is the lease interface of the journals that keep them (the
// governor's, documented at govern.Options.Lease).
type leases interface {
	Claim(ctx context.Context, key, owner string, ttl time.Duration) (uint64, error)
	ClaimExpired(ctx context.Context, owner string, ttl time.Duration, limit int) (map[string]uint64, error)
	Renew(ctx context.Context, owner string, ttl time.Duration, held map[string]uint64) ([]string, error)
	Release(ctx context.Context, key string, epoch uint64) error
}

// nodeOwner names this process as the holder of its node lease: host,
// pid and a start time, so that a process restarted on the same host can
// tell its dead predecessor's lease from a live one.
func nodeOwner() string {
	host, _ := os.Hostname()
	return host + "/" + strconv.Itoa(os.Getpid()) + "/" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// claimNode claims the node name's lease for this process, or fails when
// a live process holds it. A holder on this host whose process is gone
// (killed) is taken over at once; elsewhere its lease must expire.
func (s *Server) claimNode(ctx context.Context, l leases, node string, lease time.Duration) error {
	key := "node:" + node
	owner := nodeOwner()
	epoch, err := l.Claim(ctx, key, owner, lease)
	if errors.Is(err, govern.ErrLeased) {
		holder := leaseHolder(err)
		if !deadHere(holder) {
			return fmt.Errorf("node name %q is in use by a live process (%s): give each replica its own --node (or --data, where the default name is kept)", node, holder)
		}
		owner = holder // its process is gone: take its lease as its own
		epoch, err = l.Claim(ctx, key, owner, lease)
	}
	if err != nil {
		return fmt.Errorf("claiming node name %q: %w", node, err)
	}
	s.bgWG.Go(func() { s.holdNode(l, key, owner, epoch, lease) })
	return nil
}

// holdNode renews the node lease until the server stops, then releases
// it so that a restart takes the name back at once.
func (s *Server) holdNode(l leases, key, owner string, epoch uint64, lease time.Duration) {
	t := time.NewTicker(lease / 3)
	defer t.Stop()
	for {
		select {
		case <-s.bg.Done():
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = l.Release(ctx, key, epoch)
			cancel()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.bg, lease/3)
		lost, err := l.Renew(ctx, owner, lease, map[string]uint64{key: epoch})
		cancel()
		switch {
		case err != nil && s.bg.Err() == nil:
			s.log.Warn("renewing this replica's node name", "error", err)
		case len(lost) > 0:
			s.log.Error("another process took this replica's node name: two replicas run under one --node", "node", strings.TrimPrefix(key, "node:"))
		}
	}
}

// leaseHolder returns the holder an ErrLeased from Claim names ("… (holder)").
func leaseHolder(err error) string {
	msg := err.Error()
	i, j := strings.LastIndexByte(msg, '('), strings.LastIndexByte(msg, ')')
	if i < 0 || j < i {
		return ""
	}
	return msg[i+1 : j]
}

// deadHere reports whether holder (nodeOwner's form) is a process of
// this host that no longer runs.
func deadHere(holder string) bool {
	parts := strings.Split(holder, "/")
	host, _ := os.Hostname()
	if len(parts) != 3 || parts[0] != host {
		return false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return false
	}
	if pid == os.Getpid() {
		return false // this process: another Server in it holds the name
	}
	return processGone(pid)
}

// auditLease returns the leases of the store's journal, when replicas
// share it and the governance has a lease: then each audit export is
// owned by one replica at a time (leasedAudit), so that replicas sharing
// its cursor do not export every record once each.
func (s *Server) auditLease() (leases, time.Duration, string, bool) {
	g := s.cfg.Governance
	if g == nil || g.Lease <= 0 || !s.st.Shared() {
		return nil, 0, "", false
	}
	l, ok := s.st.Journal().(leases)
	return l, g.Lease, g.Node, ok
}

// leasedAudit runs export x while this replica holds its lease
// ("audit:" and its name), trying to claim it every third of the lease
// while another replica holds it, until ctx ends. Each time it takes the
// lease it starts from the stored cursor (a new Exporter); h tells which
// exporter is current, none when the lease is another's.
func (s *Server) leasedAudit(ctx context.Context, x AuditExport, l leases, lease time.Duration, node string, h *auditHold) {
	key := "audit:" + x.Name
	owner := node + "/" + nodeOwner()
	wait := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(lease / 3):
			return true
		}
	}
	for {
		epoch, err := l.Claim(ctx, key, owner, lease)
		if err != nil {
			if !errors.Is(err, govern.ErrLeased) && ctx.Err() == nil {
				s.log.Warn("audit export: claiming the export", "export", x.Name, "error", err)
			}
			if !wait() {
				return
			}
			continue
		}
		e := audit.NewExporter(s.st.Journal(), x.Sink, &audit.Options{Logger: s.log, Cursor: s.st.AuditCursor(x.Name)})
		h.set(e, nil)
		run, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); e.Run(run) }()
		for wait() {
			rctx, cancel := context.WithTimeout(ctx, lease/3)
			lost, err := l.Renew(rctx, owner, lease, map[string]uint64{key: epoch})
			cancel()
			if err == nil && len(lost) == 0 {
				continue
			}
			if len(lost) > 0 {
				s.log.Warn("audit export: another replica took the export over", "export", x.Name)
			}
			if err != nil {
				s.log.Warn("audit export: renewing the export's lease", "export", x.Name, "error", err)
			}
			break
		}
		stop()
		<-done
		if ctx.Err() != nil {
			// Shutdown: the caller exports what is left, then releases
			// the lease for another replica to go on at once.
			h.set(e, func(ctx context.Context) { _ = l.Release(ctx, key, epoch) })
			return
		}
		h.set(nil, nil)
	}
}

// auditHold is what a replica holds of a leased audit export: its
// current exporter (nil when another replica holds the export) and, once
// it stopped, how to release the lease.
type auditHold struct {
	mu      sync.Mutex
	e       *audit.Exporter
	release func(context.Context)
}

func (h *auditHold) set(e *audit.Exporter, release func(context.Context)) {
	h.mu.Lock()
	h.e, h.release = e, release
	h.mu.Unlock()
}

func (h *auditHold) get() (*audit.Exporter, func(context.Context)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.e, h.release
}
