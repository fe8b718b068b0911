package metrics

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// TestModelLabel checks that only configured or listed models get a label
// of their own, so that the model label's values stay bounded.
func TestModelLabel(t *testing.T) {
	m := New()
	m.KnowModels("fast", "sim-fast")
	for model, want := range map[string]string{"": "auto", "auto": "auto", "fast": "fast", "sim-fast": "sim-fast",
		"made-up-1": OtherModel, "made-up-2": OtherModel} {
		if got := m.ModelLabel(model); got != want {
			t.Errorf("ModelLabel(%q) = %q, want %q", model, got, want)
		}
	}
	m.CountTokens("prompt", "made-up-3", 5)
	var d dto.Metric
	if err := m.Tokens.WithLabelValues("prompt", OtherModel).Write(&d); err != nil || d.GetCounter().GetValue() != 5 {
		t.Errorf("tokens of an unknown model are not counted as other: %v %v", d.GetCounter().GetValue(), err)
	}
}

// TestBuildInfo checks that docstream_build_info is exported once, with the
// Go version.
func TestBuildInfo(t *testing.T) {
	mfs, err := New().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "docstream_build_info" {
			continue
		}
		if len(mf.Metric) != 1 || mf.Metric[0].GetGauge().GetValue() != 1 {
			t.Fatalf("build info: %v", mf.Metric)
		}
		for _, l := range mf.Metric[0].Label {
			if l.GetName() == "goversion" && !strings.HasPrefix(l.GetValue(), "go") {
				t.Errorf("goversion %q", l.GetValue())
			}
		}
		return
	}
	t.Fatal("no docstream_build_info")
}
