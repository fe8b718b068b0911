// Package cloud is a typed client for the Cursor Cloud Agents API (v0) and the
// backend that streams a cloud agent's messages as a run.
//
// Failures reported by the API, and requests refused locally, are an *Error
// with a stable Code; a canceled context is returned wrapped.
package cloud
