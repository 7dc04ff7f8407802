package api

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/overtime-hpc/overtime/sitemgmt/errstatus"
)

// perUserBodies bounds the request body bytes one user may have in flight at once: two
// bodies of the largest size. Together with the role check before any body is read
// (Server.write) it keeps one account, however many connections it opens, from making
// the server hold more than this in bodies and what they decode to; `overtime` sends
// one request at a time and never meets the limit.
const perUserBodies = 2 * maxBody

// bodyBudget admits request bodies against a per-user byte budget.
type bodyBudget struct {
	mu       sync.Mutex
	limit    int64
	inFlight map[string]int64 // uid → bytes admitted and not yet released
}

func (b *bodyBudget) init(limit int64) {
	b.limit = limit
	b.inFlight = map[string]int64{}
}

// perHostBodies bounds the body bytes one host credential may have in flight: its
// agent posts a heartbeat and a job report at a time (each at most maxAgentBody), so
// four of them is already more than a well-behaved agent ever sends at once.
const perHostBodies = 4 * maxAgentBody

// maxAgentBody bounds a body on the node agents' endpoints (heartbeats, job reports;
// a real one is under a kilobyte).
const maxAgentBody = 16 << 10

// admit reserves the body of r for uid until release is called (after the handler):
// its declared length, or maxBody when it has none (chunked), which is all a handler
// reads (readBody). A declared length over maxBody is tooLarge; a reservation over the
// user's budget is refused (HTTP 429) without reading anything.
func (b *bodyBudget) admit(uid string, r *http.Request) (release func(), err error) {
	return b.admitUpTo(uid, r, maxBody, b.limit)
}

// admitUpTo is admit with a per-request maximum and a per-identity budget of the
// caller's (the agent endpoints: maxAgentBody, perHostBodies).
func (b *bodyBudget) admitUpTo(uid string, r *http.Request, maxOne, budget int64) (release func(), err error) {
	n := r.ContentLength
	switch {
	case n == 0:
		return func() {}, nil
	case n > maxOne:
		return nil, errstatus.TooLarge{Limit: maxOne}
	case n < 0:
		n = maxOne
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inFlight[uid]+n > budget {
		return nil, fmt.Errorf("%s has too many large requests in progress: retry when they are done", uid)
	}
	b.inFlight[uid] += n
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.inFlight[uid] -= n; b.inFlight[uid] <= 0 {
			delete(b.inFlight, uid)
		}
	}, nil
}
