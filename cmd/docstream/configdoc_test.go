package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// keyPattern matches a configuration key written as `section.key`.
var keyPattern = regexp.MustCompile("`([a-z][a-z0-9]*\\.[a-z][a-z0-9_]*)`")

// TestConfigDoc keeps docs/configuration.md and config.yaml in step: every
// key of config.yaml is documented as `section.key`, and every key in the
// doc's tables is one that config.yaml has, with its environment variable
// spelled DOCSTREAM_<SECTION>_<KEY> where the row gives one.
func TestConfigDoc(t *testing.T) {
	keys := configKeys(t, "../../config.yaml")
	if len(keys) == 0 {
		t.Fatal("config.yaml has no keys")
	}
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, k := range keys {
		if !strings.Contains(doc, "`"+k+"`") {
			t.Errorf("docs/configuration.md does not document %s (write it as `%s`)", k, k)
		}
	}
	for _, row := range docKeyRows(doc) {
		if !slices.Contains(keys, row.key) {
			t.Errorf("docs/configuration.md documents %s, which config.yaml does not have", row.key)
			continue
		}
		section, name, _ := strings.Cut(row.key, ".")
		want := "DOCSTREAM_" + strings.ToUpper(section) + "_" + strings.ToUpper(name)
		if row.env != "" && row.env != want {
			t.Errorf("docs/configuration.md gives %s the environment variable %s; want %s", row.key, row.env, want)
		}
	}
}

// configKeys returns the keys of a config file as "section.key", in file
// order. Commented-out lines are comments to the YAML parser, so they are
// not keys.
func configKeys(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		t.Fatalf("%s is not one YAML mapping", path)
	}
	var keys []string
	top := root.Content[0].Content
	for i := 0; i+1 < len(top); i += 2 {
		section, body := top[i].Value, top[i+1]
		if body.Kind != yaml.MappingNode {
			t.Errorf("%s: section %s is not a mapping", path, section)
			continue
		}
		for j := 0; j+1 < len(body.Content); j += 2 {
			keys = append(keys, section+"."+body.Content[j].Value)
		}
	}
	return keys
}

// keyRow is a row of one of the doc's key tables: the key in its first
// cell, and the DOCSTREAM_* variable in another cell when there is one.
type keyRow struct {
	key, env string
}

var envPattern = regexp.MustCompile("`(DOCSTREAM_[A-Z0-9_]+)`")

// docKeyRows returns the rows of the doc's tables whose first cell names a
// key as `section.key`.
func docKeyRows(doc string) []keyRow {
	var rows []keyRow
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), "|")
		m := keyPattern.FindStringSubmatch(cells[0])
		if m == nil {
			continue
		}
		row := keyRow{key: m[1]}
		for _, c := range cells[1:] {
			if e := envPattern.FindStringSubmatch(c); e != nil {
				row.env = e[1]
				break
			}
		}
		rows = append(rows, row)
	}
	return rows
}
