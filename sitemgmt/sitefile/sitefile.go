// Package sitefile reads and writes the declarative site file (docs/site-file.md): the
// whole site as YAML, so that a site can live in version control and be applied
// idempotently with `overtime site apply -f site.yaml`.
package sitefile

import (
	"bytes"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// Read parses a site file strictly: unknown keys are errors, so a typo cannot silently
// drop a setting (and, applied, delete what it was meant to keep). Values are checked by
// the site manager, which also canonicalises MACs (model.Site.Normalize): Read keeps them
// as written.
func Read(r io.Reader) (*model.Site, error) {
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	var site model.Site
	if err := dec.Decode(&site); err != nil {
		if err == io.EOF {
			return nil, model.Invalid("site file is empty")
		}
		return nil, model.Invalid("site file: %v", err)
	}
	// A second document ("---" and more YAML) would otherwise be dropped without a word:
	// what it says would not be applied, and an apply deletes what the first one lacks.
	var more yaml.Node
	if err := dec.Decode(&more); err != io.EOF {
		if err != nil {
			return nil, model.Invalid("site file: %v", err)
		}
		return nil, model.Invalid("the site file holds more than one YAML document (the second starts at line %d): put the whole site in one", more.Line)
	}
	for i := range site.Exceptions {
		// YAML timestamps without a zone would be UTC; times are instants, keep them as given.
		e := &site.Exceptions[i]
		e.Start, e.End = e.Start.UTC(), e.End.UTC()
	}
	site.Sort()
	return &site, nil
}

// Write renders the site as YAML with a short header.
func Write(w io.Writer, site *model.Site) error {
	// Show exception times in the site's zone: that is how people read a timetable.
	if loc, err := site.Location(); err == nil {
		site = site.Clone()
		for i := range site.Exceptions {
			e := &site.Exceptions[i]
			e.Start, e.End = e.Start.In(loc), e.End.In(loc)
		}
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Overtime site file (docs/site-file.md). Apply with: overtime site apply -f FILE\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(site); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}
