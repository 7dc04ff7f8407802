// Package syncbuf is a bytes.Buffer safe for concurrent use: what exec.Cmd writes a
// daemon's output into from its own goroutine while a test reads it.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer collects writes; String may be called at any time.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
