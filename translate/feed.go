package translate

import (
	"errors"
	"io"
)

// Pump reads every event from dec and feeds it to seg until the input ends.
// It returns nil at the end of the input and any other read error as is;
// it does not close seg.
func Pump(dec *Decoder, seg *Segmenter) error {
	for {
		ev, err := dec.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		seg.Feed(ev)
	}
}
