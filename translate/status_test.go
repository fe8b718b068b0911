package translate_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/translate"
)

// statusEvents returns the status events of a stream.
func statusEvents(evs []documents.Event) []documents.StatusEvent {
	var out []documents.StatusEvent
	for _, ev := range evs {
		if e, ok := ev.(documents.StatusEvent); ok {
			out = append(out, e)
		}
	}
	return out
}

// TestStatusRealReconnects translates the real captures with reconnects:
// each connection and retry line is one status event, the attempt counts
// the reconnects of the run, and the documents are those without them.
func TestStatusRealReconnects(t *testing.T) {
	tests := []struct {
		capture string
		want    []documents.StatusEvent
	}{
		{"error-server-rejects-option-reconnect-retry-no-result", []documents.StatusEvent{
			{State: "reconnecting", Attempt: 1}, {State: "retrying", Attempt: 1}, {State: "reconnected", Attempt: 1},
			{State: "reconnecting", Attempt: 2}, {State: "retrying", Attempt: 2}, {State: "reconnected", Attempt: 2},
			{State: "reconnecting", Attempt: 3}, {State: "retrying", Attempt: 3}, {State: "reconnected", Attempt: 3},
		}},
		{"glob-edit-read-reconnect-usage-excerpt", []documents.StatusEvent{
			{State: "reconnecting", Attempt: 1}, {State: "retrying", Attempt: 1},
		}},
	}
	captures := map[string]realCapture{}
	for _, c := range loadRealCaptures(t) {
		captures[c.name] = c
	}
	for _, tt := range tests {
		t.Run(tt.capture, func(t *testing.T) {
			c, ok := captures[tt.capture]
			if !ok {
				t.Skipf("%s is not among the captures", tt.capture)
			}
			evs, err := translateReader(bytes.NewReader(c.input), realOptions(), c.end)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkStream(evs, realOptions()); err != nil {
				t.Fatal(err)
			}
			if got := statusEvents(evs); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("status events %v, want %v", got, tt.want)
			}
			// The same input without its connection and retry lines gives
			// the same response.
			var kept []string
			for _, line := range strings.SplitAfter(string(c.input), "\n") {
				if !strings.HasPrefix(line, `{"type":"connection"`) && !strings.HasPrefix(line, `{"type":"retry"`) {
					kept = append(kept, line)
				}
			}
			without, err := translateReader(strings.NewReader(strings.Join(kept, "")), realOptions(), c.end)
			if err != nil {
				t.Fatal(err)
			}
			if d := firstDiff(renderDocuments(t, fold(without)), renderDocuments(t, fold(evs))); d != "" {
				t.Errorf("the status events change the response at %s", d)
			}
		})
	}
}

// TestStatusAttempts checks how attempts count: a reconnect the agent
// counts from 1 again is the run's next, a retry outside of a reconnect
// starts one, and other connection subtypes make no event.
func TestStatusAttempts(t *testing.T) {
	in := strings.Join([]string{
		`{"type":"system","subtype":"init","session_id":"s"}`,
		`{"type":"connection","subtype":"reconnecting","attempt":1}`,
		`{"type":"retry","subtype":"starting","attempt":1}`,
		`{"type":"retry","subtype":"resuming","attempt":1,"checkpoint_turn_count":1}`,
		`{"type":"connection","subtype":"reconnected"}`,
		`{"type":"connection","subtype":"reconnecting","attempt":1}`,
		`{"type":"connection","subtype":"reconnecting","attempt":2}`,
		`{"type":"connection","subtype":"reconnected"}`,
		`{"type":"retry","subtype":"scheduled"}`,
		`{"type":"connection","subtype":"established"}`,
		`{"type":"connection","subtype":"reconnected"}`,
		`{"type":"result","subtype":"success","result":""}`,
	}, "\n")
	evs, err := translateReader(strings.NewReader(in), realOptions(), translate.End{})
	if err != nil {
		t.Fatal(err)
	}
	want := []documents.StatusEvent{
		{State: "reconnecting", Attempt: 1}, {State: "retrying", Attempt: 1}, {State: "retrying", Attempt: 1}, {State: "reconnected", Attempt: 1},
		{State: "reconnecting", Attempt: 2}, {State: "reconnecting", Attempt: 3}, {State: "reconnected", Attempt: 3},
		{State: "retrying", Attempt: 4}, {State: "reconnected", Attempt: 4},
	}
	if got := statusEvents(evs); !reflect.DeepEqual(got, want) {
		t.Errorf("status events\n got %v\nwant %v", got, want)
	}
}
