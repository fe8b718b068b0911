package gateway

// offStack runs f on a goroutine of its own and waits for it, raising a
// panic of f again on the caller's goroutine.
//
// A stream's handler goroutine is parked for as long as the stream is
// open, and the runtime never gives back the stack one deep call grew it
// to: it shrinks a stack only when less than a quarter of it is in use,
// and a parked handler uses more than a quarter of 8 KB (net/http's own
// frames are 1.3 KB). Decoding the body, writing the response headers or a
// batch of frames through net/http once would make every open stream hold
// 8 KB of stack instead of 4. Done here, such work grows a stack that is
// freed when it returns.
func offStack(f func()) {
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		f()
	}()
	if p := <-done; p != nil {
		panic(p)
	}
}
