package vmtest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// MonitorTimeout bounds one monitor command, including the wait for QEMU's connection.
var MonitorTimeout = 30 * time.Second

// Monitor is a VM's QEMU Machine Protocol (QMP) connection: every VM has one. QEMU
// connects at start-up, as a client, to a unix socket the harness listens on (so there is
// no window in which a test would have to wait for QEMU's socket to appear); the protocol's
// capability negotiation happens at the first command. Commands are serialised; events
// QEMU sends in between are skipped.
type Monitor struct {
	conn chan net.Conn // the accepted connection, once
	done <-chan struct{}

	mu  sync.Mutex
	c   net.Conn
	r   *bufio.Reader
	seq int
	err error // permanent failure (connection lost)
	neg bool  // qmp_capabilities sent
}

// listenMonitor makes the socket QEMU's QMP chardev connects to, in dir when its path is
// short enough for a unix socket address and in a new temporary directory otherwise.
// cleanup removes what it made.
func listenMonitor(dir string) (l *net.UnixListener, path string, cleanup func(), err error) {
	path = filepath.Join(dir, "qmp.sock")
	rmdir := ""
	if len(path) > 100 { // sun_path holds 108 bytes
		d, err := os.MkdirTemp("", "vmtest-qmp-")
		if err != nil {
			return nil, "", nil, err
		}
		rmdir = d
		path = filepath.Join(d, "qmp.sock")
	}
	_ = os.Remove(path)
	l, err = net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		if rmdir != "" {
			os.RemoveAll(rmdir)
		}
		return nil, "", nil, fmt.Errorf("vmtest: monitor socket: %w", err)
	}
	l.SetUnlinkOnClose(true)
	var once sync.Once
	cleanup = func() {
		once.Do(func() {
			l.Close()
			if rmdir != "" {
				os.RemoveAll(rmdir)
			}
		})
	}
	return l, path, cleanup, nil
}

// newMonitor accepts QEMU's connection on l in the background. done is closed when QEMU
// exits.
func newMonitor(l *net.UnixListener, done <-chan struct{}) *Monitor {
	m := &Monitor{conn: make(chan net.Conn, 1), done: done}
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(m.conn)
			return
		}
		m.conn <- c
		close(m.conn)
	}()
	return m
}

// Monitor is the VM's QMP connection.
func (vm *VM) Monitor() *Monitor { return vm.mon }

// connect waits for QEMU's connection and negotiates capabilities. m.mu is held.
func (m *Monitor) connect(deadline time.Time) error {
	if m.err != nil {
		return m.err
	}
	if m.c == nil {
		select {
		case c, ok := <-m.conn:
			if !ok {
				m.err = errors.New("vmtest: monitor: QEMU never connected")
				return m.err
			}
			m.c = c
			m.r = bufio.NewReader(c)
		case <-m.done:
			m.err = errors.New("vmtest: monitor: QEMU has exited")
			return m.err
		case <-time.After(time.Until(deadline)):
			return errors.New("vmtest: monitor: QEMU did not connect in time")
		}
	}
	_ = m.c.SetDeadline(deadline)
	if !m.neg {
		// The greeting, then capability negotiation.
		var greeting struct {
			QMP json.RawMessage `json:"QMP"`
		}
		line, err := m.r.ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(line, &greeting)
		}
		if err != nil || greeting.QMP == nil {
			m.err = fmt.Errorf("vmtest: monitor: no QMP greeting: %v %q", err, line)
			return m.err
		}
		m.neg = true
		if _, err := m.exchange("qmp_capabilities", nil); err != nil {
			return err
		}
	}
	return nil
}

// exchange sends one command and reads up to its answer. m.mu is held and the deadline set.
func (m *Monitor) exchange(name string, args any) (json.RawMessage, error) {
	m.seq++
	id := fmt.Sprintf("vmtest-%d", m.seq)
	req := map[string]any{"execute": name, "id": id}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := m.c.Write(append(b, '\n')); err != nil {
		m.err = fmt.Errorf("vmtest: monitor: %w", err)
		return nil, m.err
	}
	for {
		line, err := m.r.ReadBytes('\n')
		if err != nil {
			m.err = fmt.Errorf("vmtest: monitor: %s: %w", name, err)
			return nil, m.err
		}
		var resp struct {
			ID     string          `json:"id"`
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Class string `json:"class"`
				Desc  string `json:"desc"`
			} `json:"error"`
			Event string `json:"event"`
		}
		if err := json.Unmarshal(line, &resp); err != nil {
			m.err = fmt.Errorf("vmtest: monitor: %s: bad answer %q: %v", name, line, err)
			return nil, m.err
		}
		if resp.Event != "" || resp.ID != id {
			continue // an asynchronous event
		}
		if resp.Error != nil {
			return nil, fmt.Errorf("vmtest: monitor: %s: %s: %s", name, resp.Error.Class, resp.Error.Desc)
		}
		return resp.Return, nil
	}
}

// Command runs a QMP command (args: nil or a value that marshals to its arguments object)
// and returns its "return" value.
func (m *Monitor) Command(name string, args any) (json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	deadline := time.Now().Add(MonitorTimeout)
	if err := m.connect(deadline); err != nil {
		return nil, err
	}
	_ = m.c.SetDeadline(deadline)
	return m.exchange(name, args)
}

// HMP runs a command of QEMU's human monitor (e.g. "info status", "sendkey ctrl-alt-f1")
// and returns what it printed.
func (m *Monitor) HMP(cmdline string) (string, error) {
	ret, err := m.Command("human-monitor-command", map[string]string{"command-line": cmdline})
	if err != nil {
		return "", err
	}
	var out string
	if err := json.Unmarshal(ret, &out); err != nil {
		return "", fmt.Errorf("vmtest: monitor: %s: %v", cmdline, err)
	}
	return out, nil
}

// SendKey presses keys together (QEMU key codes, "qcodes": "a", "ret", "shift", "ctrl",
// "f1", ...) on the VM's keyboard and releases them after hold (QEMU's default, 100 ms,
// when hold is 0), like the human monitor's sendkey. It returns once QEMU has queued the
// press; the release follows on QEMU's clock.
func (m *Monitor) SendKey(hold time.Duration, keys ...string) error {
	if len(keys) == 0 {
		return errors.New("vmtest: SendKey without keys")
	}
	type keyValue struct {
		Type string `json:"type"`
		Data string `json:"data"`
	}
	args := struct {
		Keys     []keyValue `json:"keys"`
		HoldTime int64      `json:"hold-time,omitempty"`
	}{HoldTime: hold.Milliseconds()}
	for _, k := range keys {
		args.Keys = append(args.Keys, keyValue{"qcode", k})
	}
	_, err := m.Command("send-key", args)
	return err
}

// close ends the connection (QEMU is gone or going).
func (m *Monitor) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.c != nil {
		m.c.Close()
	} else {
		// A connection accepted after this point is closed by nobody else.
		go func() {
			if c, ok := <-m.conn; ok {
				c.Close()
			}
		}()
	}
	if m.err == nil {
		m.err = errors.New("vmtest: monitor: VM stopped")
	}
}
