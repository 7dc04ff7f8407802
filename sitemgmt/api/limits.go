package api

import (
	"fmt"
	"net/http"
	"sync"
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

// admit reserves the body of r for uid until release is called (after the handler):
// its declared length, or maxBody when it has none (chunked), which is all a handler
// reads (readBody). A declared length over maxBody is tooLarge; a reservation over the
// user's budget is refused (HTTP 429) without reading anything.
func (b *bodyBudget) admit(uid string, r *http.Request) (release func(), err error) {
	n := r.ContentLength
	switch {
	case n == 0:
		return func() {}, nil
	case n > maxBody:
		return nil, tooLarge{maxBody}
	case n < 0:
		n = maxBody
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inFlight[uid]+n > b.limit {
		return nil, fmt.Errorf("user %s has too many large requests in progress: retry when they are done", uid)
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
