package sse_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/sse"
)

// crlf shows the line ends of the wire bytes.
func crlf(s string) string { return strings.ReplaceAll(s, "\r\n", "⏎\n") }

func ExampleFrame_WriteTo() {
	f, _ := sse.NewFrame(3, documents.ContentDelta{DocumentID: "doc_001", Delta: "Hi"})
	var b strings.Builder
	f.WriteTo(&b)
	fmt.Print(crlf(b.String()))
	// Output:
	// id: 3⏎
	// event: content_delta⏎
	// data: {"documentId":"doc_001","delta":"Hi"}⏎
	// ⏎
}

func ExampleWriteData() {
	var b strings.Builder
	sse.WriteData(&b, []byte("[DONE]"))
	fmt.Print(crlf(b.String()))
	// Output:
	// data: [DONE]⏎
	// ⏎
}

func ExampleWriteEvent() {
	var b strings.Builder
	sse.WriteEvent(&b, "error", []byte(`{"code":"events_dropped"}`))
	fmt.Print(crlf(b.String()))
	// Output:
	// event: error⏎
	// data: {"code":"events_dropped"}⏎
	// ⏎
}

func ExampleWriteComment() {
	sse.WriteComment(os.Stdout, "ping")
	// Output:
	// : ping
}
