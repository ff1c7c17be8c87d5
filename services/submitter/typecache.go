package submitter

import (
	"context"
	"sync"
	"time"

	"github.com/axsched/ax/services/internal/store"
)

// typeCacheTTL bounds how long a changed type default (timeout, retries,
// priority) takes to reach new submissions; it saves one query per task on
// the submit path. Unknown types are never cached, so a freshly registered
// type is accepted at once.
const typeCacheTTL = time.Second

type typeCache struct {
	mu    sync.Mutex
	types map[string]cachedType
}

type cachedType struct {
	t  *store.TaskType
	at time.Time
}

func (s *Submitter) taskType(ctx context.Context, name string) (*store.TaskType, error) {
	s.types.mu.Lock()
	c, ok := s.types.types[name]
	s.types.mu.Unlock()
	if ok && time.Since(c.at) < typeCacheTTL {
		return c.t, nil
	}
	t, err := s.store.GetType(ctx, name)
	if err != nil {
		return nil, err
	}
	s.types.mu.Lock()
	defer s.types.mu.Unlock()
	if s.types.types == nil {
		s.types.types = map[string]cachedType{}
	}
	s.types.types[name] = cachedType{t: t, at: time.Now()}
	return t, nil
}
