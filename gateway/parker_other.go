//go:build !linux

package gateway

import "os"

// defaultParker returns nil where epoll is not available: runs keep their
// reading goroutine while the agent is quiet.
func defaultParker() parker { return nil }

// pipeEmpty cannot tell here; it says true.
func pipeEmpty(*os.File) bool { return true }
