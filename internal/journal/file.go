// Package journal is the file journal of UAICP 0.3 (github.com/UAICP/uaicp
// §5.4): a govern.Journal kept in one file, one JSON record per line,
// hash-chained, fsynced with group commit.
//
//	j, err := journal.Open("/var/lib/agentry/journal.jsonl", journal.Options{})
//	g, err := govern.New(ctx, &govern.Options{Journal: j, Node: "node-1"})
//	rep, err := g.Recover(ctx)
//
// # Format
//
// Each record is one line: the encoding/json form of its govern.Record
// (AppendRecord, DecodeRecord), ended by '\n'. The file holds nothing
// else, so that it can be read with any line-oriented tool, and
// `agentry audit verify --file FILE` checks its chain.
//
// # Crash safety
//
// Open reads and verifies the whole file. What an interrupted write can
// leave at its end is cut (the file truncated and fsynced) and reported
// by TornBytes: bytes after the last '\n' (a line not completely
// written), and a trailing run of NUL bytes (a file system that extended
// the file but lost the data). Anything else that is not a valid,
// chained record — a complete line that does not decode, a hash that does
// not match, a gap in the sequence — is corruption or tampering: Open
// fails with the *govern.ChainError (errors.Is govern.ErrChainBroken)
// naming the record, and never repairs it. Options.ReadOnly opens such a
// file anyway, for govern.VerifyChain to report where it breaks.
//
// After a crash, a prefix of an unacknowledged batch may survive, each
// record whole: a batch is atomic for readers and on errors, not against
// power loss (no caller of govern relies on that; each durable record is
// written before the effect it records, see govern.Journal).
//
// # Durability and group commit
//
// Append writes a batch with one write(2) and, with sync, returns once an
// fsync covering it completed. Concurrent synced appends share fsyncs:
// while one fsync runs, the appends arriving wait, and the next fsync —
// run by one of them — covers them all. A lone appender pays one fsync
// per synced append, many appenders far less than one each. Appends
// without sync become durable with the next fsync: a synced append's, an
// explicit Flush, Close, or the background flush every
// Options.FlushInterval.
//
// # One writer
//
// Open takes an exclusive, non-blocking flock(2) on the file: a second
// Open of the same file, in another process or this one, fails with
// ErrLocked. Read-only opens take no lock.
package journal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/agentry-dev/agentry/internal/durable"
	"io"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/govern"
)

// defaultFlushInterval bounds how long an append without sync stays
// volatile when no synced append follows.
const defaultFlushInterval = 100 * time.Millisecond

// Errors of a File.
var (
	// ErrLocked: another File (in this process or another) has the
	// journal open for writing.
	ErrLocked = errors.New("journal: the file is locked by another writer (is another agentry process using it?)")
	// ErrClosed: the File was closed.
	errClosed = errors.New("journal: closed")
	// ErrReadOnly: the File was opened with Options.ReadOnly.
	ErrReadOnly = errors.New("journal: opened read-only")
)

// The fault points at which Options.FaultHook is called.
const (
	PointWrite   = "write"   // before the write(2) of a batch
	PointWritten = "written" // after the write(2) of a batch returned
	PointSynced  = "synced"  // after an fsync of the journal returned
)

// Options configures Open. The zero value opens for writing with the
// default background flush.
type Options struct {
	// ReadOnly opens an existing journal for reading only: no lock is
	// taken and nothing is cut, written or checked beyond the torn tail.
	// A broken chain does not fail Open: Records yields the records as
	// the file holds them — a line that is not a record as a
	// *govern.ChainError — for govern.VerifyChain to report. Append and
	// Flush return ErrReadOnly. Records and RunRecords see the file as it
	// was at Open.
	ReadOnly bool
	// FlushInterval is how often a background flush makes appends without
	// sync durable; 0 means 100 ms, a negative value no
	// background flush.
	FlushInterval time.Duration
	// FaultHook, when set, is called at each fault point of the write
	// path (PointWrite, PointWritten, PointSynced) by the goroutine
	// writing or fsyncing, which holds the journal's lock at the first
	// two. It exists for crash tests, which kill the process from it;
	// leave it nil.
	FaultHook func(point string)
}

// File is the file journal, a govern.Journal and govern.RunReader. It is
// safe for concurrent use.
type File struct {
	path string
	opts Options
	w    *os.File // the locked, appending descriptor; nil when read-only
	r    *os.File // reads (pread), never moved
	torn int64

	mu      sync.Mutex
	closed  bool
	size    int64   // bytes of complete lines
	offsets []int64 // offsets[i]: where line i (record i+1) starts; only ever appended to
	head    govern.Record
	unique  map[string]struct{}
	runs    map[string][]int // request_id → line indexes
	buf     []byte

	// group commit
	smu     sync.Mutex
	scond   *sync.Cond
	synced  uint64 // records known durable
	syncing bool

	emu    sync.Mutex
	failed error // a write or fsync failed: the file is in doubt, no more appends

	stop, stopped chan struct{}
}

// Open opens the journal file at path — creating it (and its directory)
// when it does not exist, unless read-only — and reads it whole: it cuts
// a torn tail (see TornBytes) and verifies the chain, failing with a
// *govern.ChainError on corruption unless opts.ReadOnly. See the package
// documentation.
func Open(path string, options *Options) (*File, error) {
	var opts Options
	if options != nil {
		opts = *options
	}
	f := &File{path: path, opts: opts, unique: map[string]struct{}{}, runs: map[string][]int{}}
	f.scond = sync.NewCond(&f.smu)
	created := false
	if !opts.ReadOnly {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		w, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			w, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
		} else {
			created = err == nil
		}
		if err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		if err := lockFile(w); err != nil {
			w.Close()
			if errors.Is(err, ErrLocked) {
				return nil, fmt.Errorf("journal: open %s: %w", path, err)
			}
			return nil, fmt.Errorf("journal: lock %s: %w", path, err)
		}
		f.w = w
	}
	r, err := os.Open(path)
	if err != nil {
		f.release()
		return nil, fmt.Errorf("journal: %w", err)
	}
	f.r = r
	if err := f.load(); err != nil {
		f.release()
		var ce *govern.ChainError
		if errors.As(err, &ce) {
			return nil, fmt.Errorf("journal: %s: %w", path, err)
		}
		return nil, fmt.Errorf("journal: open %s: %w", path, err)
	}
	if !opts.ReadOnly && (created || f.torn > 0) {
		if err := f.repair(created); err != nil {
			f.release()
			return nil, fmt.Errorf("journal: open %s: %w", path, err)
		}
	}
	f.synced = uint64(len(f.offsets))
	if !opts.ReadOnly {
		interval := opts.FlushInterval
		if interval == 0 {
			interval = defaultFlushInterval
		}
		if interval > 0 {
			f.stop, f.stopped = make(chan struct{}), make(chan struct{})
			go f.flusher(interval)
		}
	}
	return f, nil
}

// release closes the descriptors of a File that failed to open.
func (f *File) release() {
	if f.r != nil {
		f.r.Close()
	}
	if f.w != nil {
		unlockFile(f.w)
		f.w.Close()
	}
}

// load reads the file: the torn tail, then every line up to it.
func (f *File) load() error {
	fi, err := f.r.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("not a regular file")
	}
	end, err := validEnd(f.r, fi.Size())
	if err != nil {
		return err
	}
	f.torn = fi.Size() - end
	// One goroutine reads the lines in batches, workers decode and hash
	// the batches concurrently, and this one checks them in order: what
	// fails is reported as it would be line by line.
	p := startReading(io.NewSectionReader(f.r, 0, end), end, !f.opts.ReadOnly)
	defer p.close()
	var v govern.ChainVerifier
	// A verified batch's records are views of its lines (decodeVerify):
	// what outlives the batch is cloned, and a batch is recycled only
	// once the next one is checked (the verifier holds its last record).
	var checked *lineBatch
	for b := range p.order {
		<-b.done
		for k := range b.recs {
			l := &b.recs[k]
			i := len(f.offsets)
			f.offsets = append(f.offsets, l.off)
			f.size = l.off + l.len
			if l.err != nil {
				if f.opts.ReadOnly {
					continue // Records reports it
				}
				return notRecord(i, l.err)
			}
			rec := &l.rec
			if !f.opts.ReadOnly {
				if err := v.NextComputed(*rec, l.hash, l.hashErr); err != nil {
					return err
				}
				if rec.Unique != "" {
					if _, dup := f.unique[rec.Unique]; dup {
						return &govern.ChainError{Seq: rec.Seq, Reason: fmt.Sprintf("unique key %q appears a second time", rec.Unique)}
					}
					f.unique[strings.Clone(rec.Unique)] = struct{}{}
				}
			}
			if run, ok := f.runs[rec.RequestID]; ok {
				f.runs[rec.RequestID] = append(run, i)
			} else {
				f.runs[strings.Clone(rec.RequestID)] = []int{i}
			}
		}
		if b.err != nil {
			return b.err
		}
		if checked != nil {
			p.recycle(checked)
		}
		checked = b
	}
	if h := v.Head(); h != nil {
		f.head = govern.Record{Seq: h.Seq, Hash: strings.Clone(h.Hash)}
	}
	return nil
}

// lineBatchSize is how many lines a batch of Open's reading holds, and
// lineBatchText the bytes its text is first made for (128 lines of a
// tool call's records fit).
const (
	lineBatchSize = 128
	lineBatchText = 128 << 10
)

// A lineBatch is lines of the file read in a row (their bytes in text,
// line k at text[ends[k-1]:ends[k]]), then their records once done is
// closed; err, when set, is why reading stopped after them.
type lineBatch struct {
	off  int64 // where the first line starts
	text []byte
	ends []int
	err  error
	done chan struct{}
	recs []readRecord
}

// A readRecord is a line's record, or why it is not one, and its hash
// (when it is to be verified).
type readRecord struct {
	off, len int64
	rec      govern.Record
	err      error
	hash     string
	hashErr  error
}

// reading is Open's reading of a file: startReading's goroutines and
// the batches they pass.
type reading struct {
	order chan *lineBatch // batches in the file's order, decoded once done is closed
	work  chan *lineBatch // batches to decode
	stop  chan struct{}
	free  chan *lineBatch
	wg    sync.WaitGroup
}

// startReading reads the lines of r — end bytes ending with a '\n' — and
// decodes (and, with verify, hashes) them on as many goroutines as the
// process may run at once, up to 4.
func startReading(r io.Reader, end int64, verify bool) *reading {
	workers := min(max(runtime.GOMAXPROCS(0), 1), 4)
	p := &reading{order: make(chan *lineBatch, 2*workers), work: make(chan *lineBatch, 2*workers),
		stop: make(chan struct{}), free: make(chan *lineBatch, 4*workers)}
	p.wg.Add(1 + workers)
	go p.read(r, end)
	for range workers {
		go p.decode(verify)
	}
	return p
}

// close stops the reading and waits for its goroutines.
func (p *reading) close() {
	close(p.stop)
	for range p.order { // until read is done
	}
	p.wg.Wait()
}

// recycle gives a batch checked back for reuse.
func (p *reading) recycle(b *lineBatch) {
	select {
	case p.free <- b:
	default:
	}
}

func (p *reading) newBatch(off int64) *lineBatch {
	var b *lineBatch
	select {
	case b = <-p.free:
		b.text, b.ends, b.recs, b.err = b.text[:0], b.ends[:0], b.recs[:0], nil
	default:
		b = &lineBatch{text: make([]byte, 0, lineBatchText), ends: make([]int, 0, lineBatchSize), recs: make([]readRecord, 0, lineBatchSize)}
	}
	b.off, b.done = off, make(chan struct{})
	return b
}

// read splits r into batches of lines, passed to decode and, in order,
// to p.order, which it closes when done.
func (p *reading) read(r io.Reader, end int64) {
	defer p.wg.Done()
	defer close(p.work)
	defer close(p.order)
	var (
		br  = bufio.NewReaderSize(r, 1<<20)
		off int64
		n   int // lines read
		acc []byte
		b   = p.newBatch(0)
	)
	send := func() bool {
		select {
		case p.order <- b:
		case <-p.stop:
			return false
		}
		select {
		case p.work <- b:
			return true
		case <-p.stop:
			close(b.done) // never decoded; nothing reads it
			return false
		}
	}
	for off < end {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if acc = append(acc, chunk...); len(acc) > MaxRecordSize {
				b.err = &govern.ChainError{Seq: uint64(n) + 1, Reason: fmt.Sprintf("line %d is longer than %d bytes", n+1, MaxRecordSize)}
				send()
				return
			}
			continue
		}
		if err != nil {
			b.err = fmt.Errorf("the file changed while it was read: %w", err)
			send()
			return
		}
		if acc != nil {
			chunk, acc = append(acc, chunk...), nil
		}
		b.text = append(b.text, chunk...)
		b.ends = append(b.ends, len(b.text))
		off += int64(len(chunk))
		n++
		if len(b.ends) == lineBatchSize {
			if !send() {
				return
			}
			b = p.newBatch(off)
		}
	}
	send()
}

// decode decodes the batches of p.work.
func (p *reading) decode(verify bool) {
	defer p.wg.Done()
	for b := range p.work {
		start, off := 0, b.off
		for _, e := range b.ends {
			line := b.text[start:e]
			b.recs = append(b.recs, readRecord{off: off, len: int64(len(line))})
			if rr := &b.recs[len(b.recs)-1]; verify {
				rr.decodeVerify(line)
			} else {
				rr.rec, rr.err = DecodeRecord(line)
			}
			start, off = e, off+int64(len(line))
		}
		close(b.done)
	}
}

// decodeVerify decodes line and computes its hash: borrowed from line
// when the hash can be computed so (decodeBorrowed), otherwise as
// DecodeRecord decodes it (and refuses it).
func (rr *readRecord) decodeVerify(line []byte) {
	if decodeBorrowed(line, &rr.rec) {
		if h, err := rr.rec.ComputeHash(); err == nil {
			rr.hash = h
			return
		}
	}
	rr.rec, rr.err = DecodeRecord(line)
	if rr.err == nil {
		rr.hash, rr.hashErr = rr.rec.ComputeHash()
	}
}

// notRecord is the chain error of line i that does not decode.
func notRecord(i int, err error) *govern.ChainError {
	return &govern.ChainError{Seq: uint64(i) + 1, Reason: fmt.Sprintf("line %d is not a journal record: %v", i+1, err)}
}

// validEnd returns where the file's complete lines end: before a
// trailing run of NUL bytes, and before the bytes after the last '\n'.
func validEnd(r io.ReaderAt, size int64) (int64, error) {
	buf := make([]byte, 64<<10)
	nul := true
	for end := size; end > 0; {
		n := min(int64(len(buf)), end)
		chunk := buf[:n]
		if _, err := r.ReadAt(chunk, end-n); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		for i := n - 1; i >= 0; i-- {
			c := chunk[i]
			if nul && c == 0 {
				continue
			}
			nul = false
			if c == '\n' {
				return end - n + i + 1, nil
			}
		}
		end -= n
	}
	return 0, nil
}

// repair cuts the torn tail and makes the file's existence and length
// durable.
func (f *File) repair(created bool) error {
	if f.torn > 0 {
		if err := f.w.Truncate(f.size); err != nil {
			return fmt.Errorf("cutting the torn tail: %w", err)
		}
	}
	if err := f.w.Sync(); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(f.path))
}

// Path returns the journal file's path.
func (f *File) Path() string { return f.path }

// TornBytes returns how many bytes Open found after the last complete
// line (an interrupted write) and cut — or, read-only, ignored.
func (f *File) TornBytes() int64 { return f.torn }

// Len returns the number of records (read-only: of lines).
func (f *File) Len() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return uint64(len(f.offsets))
}

func (f *File) hook(point string) {
	if f.opts.FaultHook != nil {
		f.opts.FaultHook(point)
	}
}

func (f *File) failure() error {
	f.emu.Lock()
	defer f.emu.Unlock()
	return f.failed
}

func (f *File) fail(err error) {
	f.emu.Lock()
	if f.failed == nil {
		f.failed = err
	}
	f.emu.Unlock()
}

// Append implements govern.Journal: it seals recs after the last record,
// writes them with one write(2) and, with sync, waits for an fsync
// covering them (shared with concurrent appends, see the package
// documentation). A record whose Unique key is taken (or repeated in
// recs) makes it append nothing and return an error wrapping
// govern.ErrDuplicate. ctx is consulted before the write only: once
// written, Append waits for durability regardless. After a failed write
// or fsync, the file is in doubt and every Append fails: reopen it.
func (f *File) Append(ctx context.Context, sync bool, recs ...*govern.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if f.w == nil {
		return ErrReadOnly
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return errClosed
	}
	if err := f.failure(); err != nil {
		f.mu.Unlock()
		return err
	}
	if len(recs) == 0 {
		last := uint64(len(f.offsets))
		f.mu.Unlock()
		if sync {
			return f.syncTo(last)
		}
		return nil
	}
	var batch map[string]struct{}
	for _, r := range recs {
		if r.Unique == "" {
			continue
		}
		_, taken := f.unique[r.Unique]
		_, again := batch[r.Unique]
		if taken || again {
			f.mu.Unlock()
			return fmt.Errorf("journal: unique key %q: %w", r.Unique, govern.ErrDuplicate)
		}
		if batch == nil {
			batch = map[string]struct{}{}
		}
		batch[r.Unique] = struct{}{}
	}
	buf := f.buf[:0]
	var prev *govern.Record
	if f.head.Seq > 0 {
		prev = &f.head
	}
	ends := make([]int, len(recs))
	for i, r := range recs {
		if err := govern.Seal(prev, r); err != nil {
			f.mu.Unlock()
			return err
		}
		var err error
		if buf, err = AppendRecord(buf, r); err != nil {
			f.mu.Unlock()
			return err
		}
		ends[i] = len(buf)
		prev = r
	}
	f.hook(PointWrite)
	n, err := f.w.Write(buf)
	f.hook(PointWritten)
	if err != nil {
		// A short write leaves part of the batch: take it back, or give
		// up on the file.
		err = fmt.Errorf("journal: append: wrote %d of %d bytes: %w", n, len(buf), err)
		if n > 0 {
			if terr := f.w.Truncate(f.size); terr != nil {
				f.fail(fmt.Errorf("%w; cutting it back failed: %v", err, terr))
			}
		}
		f.mu.Unlock()
		return err
	}
	start := 0
	for i, r := range recs {
		f.runs[r.RequestID] = append(f.runs[r.RequestID], len(f.offsets))
		f.offsets = append(f.offsets, f.size+int64(start))
		start = ends[i]
	}
	for k := range batch {
		f.unique[k] = struct{}{}
	}
	f.size += int64(len(buf))
	last := recs[len(recs)-1]
	f.head = govern.Record{Seq: last.Seq, Hash: last.Hash}
	if cap(buf) <= 1<<20 {
		f.buf = buf
	}
	f.mu.Unlock()
	if sync {
		return f.syncTo(last.Seq)
	}
	return nil
}

// syncTo returns once record seq is durable. One caller at a time runs
// the fsync; the others wait for it, and the next fsync covers every
// record written before it started (group commit).
func (f *File) syncTo(seq uint64) error {
	f.smu.Lock()
	defer f.smu.Unlock()
	for f.synced < seq {
		if err := f.failure(); err != nil {
			return err
		}
		if f.syncing {
			f.scond.Wait()
			continue
		}
		f.syncing = true
		f.smu.Unlock()
		// Let the goroutines that are ready to run go first, so that
		// the records they are about to append are covered by this
		// fsync too (group commit, as PostgreSQL's commit_delay, but
		// waiting for no clock): with nothing else ready it returns at
		// once; otherwise the fsync starts once they have run to their
		// next blocking point — under concurrent appends the wait that
		// saves the fsyncs.
		runtime.Gosched()
		f.mu.Lock()
		target := uint64(len(f.offsets))
		f.mu.Unlock()
		err := f.w.Sync()
		if err == nil {
			f.hook(PointSynced)
		}
		f.smu.Lock()
		f.syncing = false
		if err != nil {
			// After a failed fsync the kernel may have dropped the dirty
			// pages: what is on disk is unknown, so stop appending.
			f.fail(fmt.Errorf("journal: fsync: %w", err))
		} else if target > f.synced {
			f.synced = target
		}
		f.scond.Broadcast()
	}
	return nil
}

// Flush makes every record appended so far durable.
func (f *File) Flush(ctx context.Context) error {
	if f.w == nil {
		return ErrReadOnly
	}
	return f.Append(ctx, true)
}

func (f *File) flusher(interval time.Duration) {
	defer close(f.stopped)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		f.mu.Lock()
		last := uint64(len(f.offsets))
		f.mu.Unlock()
		f.smu.Lock()
		behind := f.synced < last
		f.smu.Unlock()
		if behind {
			_ = f.syncTo(last) // a failure is sticky: the next Append reports it
		}
	}
}

// Records implements govern.Journal: the records with Seq ≥ from, in
// order, read through the file's own read descriptor by the offset index
// (never a rescan), including records appended while it iterates. A
// read-only File yields its lines as they are: a line that does not
// decode yields a *govern.ChainError.
func (f *File) Records(ctx context.Context, from uint64) iter.Seq2[govern.Record, error] {
	return func(yield func(govern.Record, error) bool) {
		if from == 0 {
			from = 1
		}
		next := int(min(from-1, uint64(1)<<40))
		var buf []byte
		for {
			if err := ctx.Err(); err != nil {
				yield(govern.Record{}, err)
				return
			}
			lines, end, err := f.lines(next, &buf)
			if err != nil {
				yield(govern.Record{}, err)
				return
			}
			if lines == nil {
				return
			}
			for k, line := range lines {
				if k > 0 {
					if err := ctx.Err(); err != nil {
						yield(govern.Record{}, err)
						return
					}
				}
				rec, err := f.decode(next+k, line)
				if !yield(rec, err) || err != nil {
					return
				}
			}
			next = end
		}
	}
}

// readChunk bounds the bytes one read of Records fetches.
const readChunk = 256 << 10

// lines reads the lines from index next on — as many as fit in readChunk,
// at least one — and returns them and the index after the last; nil when
// there is none.
func (f *File) lines(next int, buf *[]byte) ([][]byte, int, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, 0, errClosed
	}
	n := len(f.offsets)
	if next >= n {
		f.mu.Unlock()
		return nil, next, nil
	}
	offs := f.offsets[:n] // an immutable prefix: safe to read unlocked
	size := f.size
	f.mu.Unlock()
	start, end := offs[next], next+1
	for end < n && offs[end]-start < readChunk {
		end++
	}
	stop := size
	if end < n {
		stop = offs[end]
	}
	b, err := f.readAt(start, stop, buf)
	if err != nil {
		return nil, 0, err
	}
	lines := make([][]byte, 0, end-next)
	for i := next; i < end; i++ {
		e := stop
		if i+1 < end {
			e = offs[i+1]
		}
		lines = append(lines, b[offs[i]-start:e-start])
	}
	return lines, end, nil
}

func (f *File) readAt(start, stop int64, buf *[]byte) ([]byte, error) {
	need := int(stop - start)
	if cap(*buf) < need {
		*buf = make([]byte, need)
	}
	b := (*buf)[:need]
	if _, err := f.r.ReadAt(b, start); err != nil {
		f.mu.Lock()
		closed := f.closed
		f.mu.Unlock()
		if closed {
			return nil, errClosed
		}
		return nil, fmt.Errorf("journal: read %s: %w", f.path, err)
	}
	return b, nil
}

// decode decodes line i; for a writable File, whose chain Open verified,
// a line that no longer decodes as record i+1 means the file was changed
// underneath.
func (f *File) decode(i int, line []byte) (govern.Record, error) {
	rec, err := DecodeRecord(line)
	if err != nil {
		return govern.Record{}, notRecord(i, err)
	}
	if f.w != nil && rec.Seq != uint64(i)+1 {
		return govern.Record{}, &govern.ChainError{Seq: uint64(i) + 1, Reason: fmt.Sprintf("line %d holds record %d: the file was changed by someone else", i+1, rec.Seq)}
	}
	return rec, nil
}

// RunRecords implements govern.RunReader: the records of one run in
// order, found by the request_id index built at Open.
func (f *File) RunRecords(ctx context.Context, requestID string) ([]govern.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, errClosed
	}
	idx := f.runs[requestID]
	idx = idx[:len(idx):len(idx)] // appends to the index go elsewhere
	f.mu.Unlock()
	out := make([]govern.Record, 0, len(idx))
	var buf []byte
	for _, i := range idx {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		lines, _, err := f.lineAt(i, &buf)
		if err != nil {
			return nil, err
		}
		rec, err := f.decode(i, lines)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// lineAt reads line i.
func (f *File) lineAt(i int, buf *[]byte) ([]byte, int, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, 0, errClosed
	}
	start, stop := f.offsets[i], f.size
	if i+1 < len(f.offsets) {
		stop = f.offsets[i+1]
	}
	f.mu.Unlock()
	b, err := f.readAt(start, stop, buf)
	return b, i + 1, err
}

// Close flushes what was appended, stops the background flush, and
// releases the file and its lock. Appends after Close fail with
// ErrClosed. It returns the flush's error, if any.
func (f *File) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	last := uint64(len(f.offsets))
	f.mu.Unlock()
	if f.stop != nil {
		close(f.stop)
		<-f.stopped
	}
	var err error
	if f.w != nil {
		err = f.syncTo(last)
		unlockFile(f.w)
		if cerr := f.w.Close(); err == nil {
			err = cerr
		}
	}
	if cerr := f.r.Close(); err == nil {
		err = cerr
	}
	return err
}
