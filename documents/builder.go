package documents

import (
	"slices"
	"strings"
)

// Builder folds document stream events into a ChatResponse. Folding the
// stream of a run gives exactly the non-streaming answer for that run.
// The zero Builder is ready to use.
type Builder struct {
	resp  ChatResponse
	docs  map[string]*building
	order []*building
	last  *building // the document last started or added to
	done  bool
}

type building struct {
	doc Document
	// The content so far is shared, the producer's own (ContentDelta's
	// Content, or DocumentEnd's FinalContent), until a delta comes without
	// it; from then on it is copied.
	shared  string
	content strings.Builder
	final   bool // the content is DocumentEnd's FinalContent
}

// add appends a delta to the content.
func (d *building) add(e ContentDelta) {
	if d.content.Len() == 0 && len(e.Content) == len(d.shared)+len(e.Delta) &&
		strings.HasPrefix(e.Content, d.shared) && strings.HasSuffix(e.Content, e.Delta) {
		d.shared = e.Content
		return
	}
	if d.shared != "" {
		d.content.WriteString(d.shared)
		d.shared = ""
	}
	d.content.WriteString(e.Delta)
}

// text returns the content so far.
func (d *building) text() string {
	if d.content.Len() > 0 {
		return d.content.String()
	}
	return d.shared
}

// Add folds one event into the response.
func (b *Builder) Add(ev Event) {
	if b.docs == nil {
		b.docs = make(map[string]*building)
	}
	switch e := ev.(type) {
	case ResponseStart:
		b.resp.ID = e.ID
		b.resp.ConversationID = e.ConversationID
		b.resp.Model = e.Model
		b.resp.Mode = e.Mode
		b.resp.Created = e.Created
	case DocumentStart:
		d := &building{doc: Document{ID: e.ID, Type: e.Type, Sequence: e.Sequence, Metadata: e.Metadata}}
		b.docs[e.ID] = d
		b.order = append(b.order, d)
		b.last = d
	case ContentDelta:
		if d := b.doc(e.DocumentID); d != nil {
			d.add(e)
		}
	case DocumentEnd:
		if d := b.doc(e.DocumentID); d != nil {
			if e.FinalContent != nil {
				// The final content replaces the deltas': a finished run
				// keeps one copy of its text, not two.
				d.shared, d.content, d.final = *e.FinalContent, strings.Builder{}, true
			}
			if len(e.Metadata) > 0 {
				d.doc.Metadata = e.Metadata
			}
		}
	case DocumentUpdate:
		if d := b.doc(e.DocumentID); d != nil && len(e.Metadata) > 0 {
			d.doc.Metadata = e.Metadata
		}
	case Done:
		b.done = true
		b.resp.ID = e.ID
		if e.ConversationID != nil {
			b.resp.ConversationID = e.ConversationID
		}
		b.resp.Status = e.Status
		b.resp.Usage = e.Usage
		b.resp.Metadata = e.Metadata
	}
}

// doc returns the document with the given id, or nil. Deltas come in runs
// for one document: the last one is tried before the map.
func (b *Builder) doc(id string) *building {
	if b.last != nil && b.last.doc.ID == id {
		return b.last
	}
	d := b.docs[id]
	if d != nil {
		b.last = d
	}
	return d
}

// Done reports whether the done event has been folded.
func (b *Builder) Done() bool { return b.done }

// Response returns the response folded so far. Before done its status is
// "streaming" and open documents carry the content received so far.
func (b *Builder) Response() ChatResponse {
	r := b.resp
	if !b.done {
		r.Status = StatusStreaming
	}
	r.Documents = make([]Document, 0, len(b.order))
	for _, d := range b.order {
		doc := d.doc
		if d.final || d.doc.Type.IsText() || d.text() != "" {
			doc.Content = new(d.text())
		}
		if len(doc.Metadata) == 0 {
			doc.Metadata = []byte("{}")
		}
		r.Documents = append(r.Documents, doc)
	}
	slices.SortStableFunc(r.Documents, func(a, b Document) int { return a.Sequence - b.Sequence })
	return r
}
