package kubeapi

import (
	"github.com/jetplane/jetplane/projections"
)

// rewatch takes a watch up again after the store ended its subscription
// because it fell behind: from the store's window when that still holds
// the changes after last (the last sequence the stream sent), else from
// the log as a resume does. It returns the events to send first and the
// sequence the stream has then reached. An error ends the stream (stop is
// then a no-op); the client resumes from the last resourceVersion it saw.
func (s *Server) rewatch(q *request, query projections.Query, sel selector, last uint64) (<-chan projections.Change, func(), []watchEvent, uint64, error) {
	changes, stop, err := s.cfg.Store.Watch(query, last)
	if err == nil {
		return changes, stop, nil, last, nil
	}
	if errorsIsGone(err) && s.cfg.Log != nil {
		changes, stop, more, to, err := s.resume(q, query, sel, last)
		if err == nil {
			return changes, stop, more, to, nil
		}
	}
	return nil, func() {}, nil, last, err
}
