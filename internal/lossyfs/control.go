package lossyfs

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// The control protocol: a client connects to the daemon's unix socket and
// sends one JSON Request per line; the daemon answers each with one JSON
// Response line.

// Control operations.
const (
	// OpPowerLoss loses power (PowerLoss with the request's options) and
	// mounts the backing directory again on the same mountpoint before
	// answering. Kill the processes using the mount first.
	OpPowerLoss = "powerloss"
	// OpSync makes everything durable (FS.Sync).
	OpSync = "sync"
	// OpStatus answers with the mountpoint.
	OpStatus = "status"
)

// Request is one control command.
type Request struct {
	Op          string `json:"op"`
	Seed        int64  `json:"seed,omitempty"`
	Torn        bool   `json:"torn,omitempty"`
	NoWriteback bool   `json:"no_writeback,omitempty"`
}

// Response answers a Request.
type Response struct {
	OK         bool    `json:"ok"`
	Error      string  `json:"error,omitempty"`
	Report     *Report `json:"report,omitempty"`
	Mountpoint string  `json:"mountpoint,omitempty"`
	Backing    string  `json:"backing,omitempty"`
}

// ErrControl is a failure the daemon reported.
var ErrControl = errors.New("lossyfs: control")

// Daemon keeps a lossyfs mounted and serves the control socket.
type Daemon struct {
	opts   Options
	log    hclog.Logger
	ln     net.Listener
	socket string

	mu sync.Mutex // serialises commands; guards fs
	fs *FS

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// StartDaemon mounts backing on mountpoint and listens on socket (removed
// first if it exists). Close unmounts cleanly.
func StartDaemon(backing, mountpoint, socket string, opts Options) (*Daemon, error) {
	f, err := Mount(backing, mountpoint, opts)
	if err != nil {
		return nil, err
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		_ = f.Unmount()
		return nil, fmt.Errorf("lossyfs: %w", err)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		_ = f.Unmount()
		return nil, fmt.Errorf("lossyfs: control socket: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Daemon{opts: opts, log: f.log, ln: ln, socket: socket, fs: f, ctx: ctx, cancel: cancel}
	d.wg.Add(1)
	go d.accept()
	return d, nil
}

func (d *Daemon) accept() {
	defer d.wg.Done()
	for {
		conn, err := d.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				d.log.Error("control accept", "error", err)
			}
			return
		}
		d.wg.Add(1)
		go d.serve(conn)
	}
}

func (d *Daemon) serve(conn net.Conn) {
	defer d.wg.Done()
	defer conn.Close()
	stop := context.AfterFunc(d.ctx, func() { conn.Close() })
	defer stop()
	sc := bufio.NewScanner(conn)
	enc := json.NewEncoder(conn)
	for sc.Scan() {
		var req Request
		resp := Response{}
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			resp.Error = fmt.Sprintf("bad request: %v", err)
		} else {
			resp = d.Do(d.ctx, req)
		}
		if err := enc.Encode(resp); err != nil {
			return
		}
	}
}

// Do runs one command.
func (d *Daemon) Do(ctx context.Context, req Request) Response {
	d.mu.Lock()
	defer d.mu.Unlock()
	resp := Response{OK: true, Mountpoint: d.fs.Mountpoint(), Backing: d.fs.Backing()}
	var err error
	switch req.Op {
	case OpPowerLoss:
		var rep Report
		rep, err = d.powerLoss(ctx, PowerLossOptions{Seed: req.Seed, Torn: req.Torn, NoWriteback: req.NoWriteback})
		resp.Report = &rep
	case OpSync:
		err = d.fs.Sync()
	case OpStatus:
	default:
		err = fmt.Errorf("unknown op %q", req.Op)
	}
	if err != nil {
		resp.OK, resp.Error = false, err.Error()
	}
	return resp
}

func (d *Daemon) powerLoss(ctx context.Context, opts PowerLossOptions) (Report, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rep, err := d.fs.PowerLoss(ctx, opts)
	if err != nil {
		return rep, err
	}
	f, err := d.fs.MountAgain(d.opts)
	if err != nil {
		return rep, fmt.Errorf("mount again: %w", err)
	}
	d.fs = f
	return rep, nil
}

// FS returns the current mount (a new one after each power loss).
func (d *Daemon) FS() *FS {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fs
}

// Close stops serving and unmounts cleanly (everything becomes durable).
func (d *Daemon) Close() error {
	d.cancel()
	err := d.ln.Close()
	d.wg.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	if uerr := d.fs.Unmount(); uerr != nil && !errors.Is(uerr, ErrClosed) {
		err = errors.Join(err, uerr)
	}
	_ = os.Remove(d.socket)
	return err
}

// Control sends one request to the daemon listening on socket.
func Control(ctx context.Context, socket string, req Request) (Response, error) {
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "unix", socket)
	if err != nil {
		return Response{}, fmt.Errorf("lossyfs: dial control %s: %w", socket, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return Response{}, fmt.Errorf("lossyfs: control %s: %w", socket, err)
	}
	var resp Response
	if err := json.NewDecoder(conn).Decode(&resp); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return Response{}, fmt.Errorf("lossyfs: control %s: %w", socket, err)
	}
	if !resp.OK {
		return resp, fmt.Errorf("%w: %s: %s", ErrControl, req.Op, resp.Error)
	}
	return resp, nil
}

// PowerLossVia asks the daemon on socket to lose power and remount.
func PowerLossVia(ctx context.Context, socket string, opts PowerLossOptions) (Report, error) {
	resp, err := Control(ctx, socket, Request{Op: OpPowerLoss, Seed: opts.Seed, Torn: opts.Torn, NoWriteback: opts.NoWriteback})
	if err != nil {
		return Report{}, err
	}
	if resp.Report == nil {
		return Report{}, fmt.Errorf("%w: powerloss answer has no report", ErrControl)
	}
	return *resp.Report, nil
}
