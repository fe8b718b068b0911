//go:build !linux

package gateway

// defaultParker returns nil where epoll is not available: runs keep their
// reading goroutine while the agent is quiet.
func defaultParker() parker { return nil }
