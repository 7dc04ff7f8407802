package imagestore

import (
	"fmt"
	"sync"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// inflight tracks what is being uploaded: per user (the quota) and per staged file and
// version (one writer per file; no publish, discard or gc while a file of the version
// streams).
type inflight struct {
	mu     sync.Mutex
	perUID map[string]int
	files  map[string]bool // image/version/name
	vers   map[string]int  // image/version → uploads in flight
	pub    map[string]bool // image/version being published, discarded or deleted by gc
}

func (u *inflight) init() {
	u.perUID, u.files, u.vers, u.pub = map[string]int{}, map[string]bool{}, map[string]int{}, map[string]bool{}
}

// start admits one upload of file name of version key by uid: *TooMany beyond limit
// uploads of uid in flight, a conflict when the file is being uploaded or the version
// published.
func (u *inflight) start(uid, key, name string, limit int) (release func(), err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.perUID[uid] >= limit:
		return nil, &TooMany{Msg: fmt.Sprintf("%s has %d uploads in progress (at most %d): retry when one is done", uid, u.perUID[uid], limit)}
	case u.files[key+"/"+name]:
		return nil, model.Conflict("%s of %s is being uploaded by another request", name, key)
	case u.pub[key]:
		return nil, model.Conflict("%s is being published or discarded", key)
	}
	u.perUID[uid]++
	u.files[key+"/"+name] = true
	u.vers[key]++
	return func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.perUID[uid]--; u.perUID[uid] <= 0 {
			delete(u.perUID, uid)
		}
		delete(u.files, key+"/"+name)
		if u.vers[key]--; u.vers[key] <= 0 {
			delete(u.vers, key)
		}
	}, nil
}

// busy reports whether version key has an upload, publish or discard in flight.
func (u *inflight) busy(key string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.vers[key] > 0 || u.pub[key]
}

// exclusive reserves version key for publishing, discarding or deleting: no upload into
// it runs.
func (u *inflight) exclusive(key string) (release func(), err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.vers[key] > 0 || u.pub[key] {
		return nil, model.Conflict("%s has uploads in progress: publish when they are done", key)
	}
	u.pub[key] = true
	return func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		delete(u.pub, key)
	}, nil
}
