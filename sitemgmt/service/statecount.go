package service

import (
	"context"
	"sync"
)

// StateWrites counts the writes of runtime state documents into the store (puts and
// deletes, by kind), each as it returned: what the directory is asked to write, the
// load every replica adds to it (overtime_state_writes_total, docs/operations.md).
type StateWrites struct {
	Kind   string // heartbeats, reports, bootimages, booted, power, audit, slurm
	OK     uint64 // written (or deleted)
	Failed uint64 // the store refused or could not be reached (queued again)
}

// writeCounter counts the writes that pass through it to the store.
type writeCounter struct {
	StateStore
	mu     sync.Mutex
	counts map[string]*StateWrites
}

func (c *writeCounter) count(kind string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]*StateWrites{}
	}
	n := c.counts[kind]
	if n == nil {
		n = &StateWrites{Kind: kind}
		c.counts[kind] = n
	}
	if err != nil {
		n.Failed++
	} else {
		n.OK++
	}
}

func (c *writeCounter) PutState(ctx context.Context, kind, key string, doc []byte) error {
	err := c.StateStore.PutState(ctx, kind, key, doc)
	c.count(kind, err)
	return err
}

func (c *writeCounter) DeleteState(ctx context.Context, kind, key string) error {
	err := c.StateStore.DeleteState(ctx, kind, key)
	c.count(kind, err)
	return err
}

// StateWriteCounts returns the state writes made so far, by kind (nil without a
// StateStore).
func (s *Service) StateWriteCounts() []StateWrites {
	c, ok := s.state.(*writeCounter)
	if !ok {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]StateWrites, 0, len(c.counts))
	for _, n := range c.counts {
		out = append(out, *n)
	}
	return out
}
