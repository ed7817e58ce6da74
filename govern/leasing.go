package govern

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Leasing: see leaser. The governor holds the lease of every run it
// executes (live, with an epoch) and renews them all together every
// third of Options.Lease, in a goroutine that runs while it has any.

// leased reports whether the governor uses leases.
func (g *Governor) leased() bool { return g.leases != nil }

// claimLocked makes r's run executing here: it claims the run's lease,
// reads the run from the journal as it is now (after the claim, no
// earlier holder can add to it), and checks that it is still the run r
// was attached as — same phase, same pause, same writes — adopting the
// decisions recorded since. It is a no-op for a run that holds a lease
// already or without leases. r.mu is held.
func (r *Run) claimLocked(ctx context.Context) error {
	g := r.g
	if !g.leased() || r.epoch > 0 {
		return nil
	}
	epoch, err := g.leases.Claim(ctx, r.requestID, g.opts.Node, g.opts.Lease)
	if err != nil {
		if errors.Is(err, ErrLeased) {
			return fmt.Errorf("govern: run %s executes in another process: %w", r.requestID, err)
		}
		return err
	}
	recs, err := g.runRecords(ctx, r.requestID)
	if err != nil {
		return err
	}
	fresh, err := g.rebuild(recs)
	if err != nil {
		return err
	}
	switch {
	case fresh.phase.Terminal():
		return ErrRunClosed
	case fresh.paused != r.paused || fresh.pausedAt != r.pausedAt || fresh.phase != r.phase || len(fresh.writes) != len(r.writes):
		if fresh.paused {
			_ = g.leases.Release(context.WithoutCancel(ctx), r.requestID, epoch)
		}
		// A run not paused keeps the claim: it expires, and a reaper
		// recovers the run (its executor died, or it executes here).
		return fmt.Errorf("govern: run %s moved on since it was attached; attach it again: %w", r.requestID, ErrDuplicate)
	}
	r.approvals = fresh.approvals
	r.epoch, r.renewed = epoch, time.Now()
	return nil
}

// release gives up the lease of a run that stops executing here without
// a record that moves it (a resume that found nothing to do).
func (r *Run) release(ctx context.Context) {
	r.mu.Lock()
	epoch := r.epoch
	r.epoch = 0
	r.mu.Unlock()
	if epoch > 0 && r.g.leased() {
		_ = r.g.leases.Release(context.WithoutCancel(ctx), r.requestID, epoch)
	}
}

// giveUp is called when the run's end could not be journaled (err): with
// leases this process stops renewing its lease, so that once it expires
// a replica — this one's reaper too — recovers the run by the recovery
// rules (rolling back what it wrote, journaling its end once), rather
// than the run staying held, and open, for as long as this process
// lives.
func (r *Run) giveUp(err error) {
	if !r.g.leased() {
		return
	}
	r.g.forget(r)
	r.g.log.Warn("govern: a run's end could not be journaled; it is recovered once its lease expires", "request_id", r.requestID, "error", err)
}

// fenced notes that the run's lease is lost: another process continues
// it, and this Run value can do nothing more.
func (r *Run) fenced() {
	r.mu.Lock()
	r.lost = true
	r.idle.Broadcast()
	r.mu.Unlock()
	r.g.forget(r)
	r.g.log.Warn("govern: run lease lost; another process continues the run", "request_id", r.requestID)
}

// live makes r the run executing here, and keeps its lease renewed.
func (g *Governor) makeLive(r *Run) {
	g.mu.Lock()
	g.live[r.requestID] = r
	var idle chan struct{}
	if g.leased() && g.idle == nil {
		idle = make(chan struct{})
		g.idle = idle
	}
	g.mu.Unlock()
	if idle != nil {
		go g.heartbeat(idle)
	}
}

// heartbeat renews the leases of the runs executing here every third of
// the lease, until idle is closed: none is left.
func (g *Governor) heartbeat(idle <-chan struct{}) {
	every := g.opts.Lease / 3
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-idle:
			return
		}
		held := map[string]uint64{}
		runs := map[string]*Run{}
		g.mu.Lock()
		for id, r := range g.live {
			runs[id] = r
		}
		g.mu.Unlock()
		for id, r := range runs {
			r.mu.Lock()
			if r.epoch > 0 && !r.lost {
				held[id] = r.epoch
			}
			r.mu.Unlock()
		}
		asked := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), every)
		lost, err := g.leases.Renew(ctx, g.opts.Node, g.opts.Lease, held)
		cancel()
		if err != nil {
			// Not renewed: a lease not renewed for a whole lease may be
			// another process's by now; stop its run here rather than
			// learn it from the journal.
			g.log.Warn("govern: renewing run leases", "runs", len(held), "error", err)
			for id := range held {
				r := runs[id]
				r.mu.Lock()
				expired := asked.Sub(r.renewed) >= g.opts.Lease
				r.mu.Unlock()
				if expired {
					lost = append(lost, id)
				}
			}
		} else {
			for id := range held {
				r := runs[id]
				r.mu.Lock()
				r.renewed = asked
				r.mu.Unlock()
			}
		}
		for _, id := range lost {
			if r := runs[id]; r != nil {
				r.fenced()
			}
		}
		t.Reset(every)
	}
}

// claimable returns the runs Recover is to recover with leases: at the
// first call, every open run not paused whose lease it can claim (its
// holder died, or is this node in an earlier process); then those whose
// lease expired. The runs come with their new epochs.
func (g *Governor) claimable(ctx context.Context) (map[string]uint64, error) {
	claimed, err := g.leases.ClaimExpired(ctx, g.opts.Node, g.opts.Lease, recoverBatch)
	if err != nil {
		return nil, err
	}
	if g.recovered.Swap(true) {
		return claimed, nil
	}
	for _, id := range g.idx.openRuns("") {
		g.mu.Lock()
		_, isLive := g.live[id]
		g.mu.Unlock()
		if _, ok := claimed[id]; ok || isLive || g.idx.paused(id) {
			continue
		}
		epoch, err := g.leases.Claim(ctx, id, g.opts.Node, g.opts.Lease)
		switch {
		case errors.Is(err, ErrLeased), errors.Is(err, ErrRunClosed):
			continue
		case err != nil:
			return claimed, err
		}
		claimed[id] = epoch
	}
	return claimed, nil
}
